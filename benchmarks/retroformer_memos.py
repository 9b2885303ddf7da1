"""What the retrospective model writes, per finished arena run (seed_agents.md §A4): on
the held-out plan_path_fog instances the frozen actor fails greedily, the share of M_r's
greedy memos that name a wall the actor bumped into in the failed attempt ("x#r,c;" in
the transcript), the share naming a hidden wall of the instance, and success after the
retry. Paired by seed against a baseline with policylab.arena.stats.

    python benchmarks/retroformer_memos.py runs/arena-retro runs/sft-actor \
        retroformer_online frozen_retro [eval_n]

`ceiling`: the same frozen actor with scripted memos instead of a model — none (an empty
retry), a constant memo "#0,0;" (any text in front of a greedy actor changes its path),
and the first wall the failed attempt bumped into (what a perfect M_r could copy):

    python benchmarks/retroformer_memos.py ceiling runs/sft-actor [eval_n]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import torch

import policylab.tasks as tasks
from policylab.arena.stats import mean_ci, paired_difference_ci
from policylab.engines import Sampling
from policylab.envs.text import play_text
from policylab.models import load_model
from policylab.policies.language_model import LanguageModelPolicy
from policylab.tasks.fog_memos import hidden_walls
from policylab.workflows.multi_turn import EpisodeSettings, rollout_episodes

_MEMO = re.compile(r"#(\d+),(\d+);")


class _Pair:
    def __init__(self, retro, actor):
        self.retro, self.actor = retro, actor

    def __call__(self, role):
        return self.retro


def _policy(folder: str) -> LanguageModelPolicy:
    model, tokenizer = load_model(folder)
    return LanguageModelPolicy(model.eval(), tokenizer, sampling=Sampling(temperature=0.0))


def memo_scores(run: Path, actor, n: int) -> dict[str, float]:
    """Greedy M_r of `run` over the first `n` test instances, 2 attempts."""
    retro = _policy(str(run / "model"))
    task = tasks.get("plan_path_fog", attempts=2)
    examples = task.examples("test", n, seed=0)
    settings = EpisodeSettings(attempts=2, reflect=True, temperature=0.0)
    trajs, _ = rollout_episodes(
        examples, task.env, _Pair(retro, actor), retro.tokenizer, settings, seed=0
    )
    bumped = hidden = count = 0
    for traj in trajs:
        for t in (t for t in traj.turns if t.phase == "reflect"):
            count += 1
            memo = _MEMO.fullmatch(t.text)
            context = retro.tokenizer.decode(t.context_ids)
            if memo is None:
                continue
            cell = (int(memo.group(1)), int(memo.group(2)))
            bumped += f"x#{cell[0]},{cell[1]};" in context
            hidden += cell in hidden_walls(examples[traj.instance])
    return {
        "names_bump": bumped / max(count, 1),
        "names_hidden": hidden / max(count, 1),
        "pass@2": sum(t.success for t in trajs) / len(trajs),
        "failures": float(count),
    }


def ceiling(actor_folder: str, n: str = "100") -> None:
    """pass@1 and pass@2 of the greedy frozen actor with scripted memos (docstring)."""
    torch.set_num_threads(1)
    actor = _policy(actor_folder)
    tok = actor.tokenizer
    greedy = Sampling(temperature=0.0, max_new_tokens=6, stop_strings=(";",))
    task = tasks.get("plan_path_fog", attempts=2)
    examples = task.examples("test", int(n), seed=0)

    def act_with(mode: str):
        def act(role: str, context: str) -> str:
            if role == "reflect":
                bumps = re.findall(r"x#(\d+),(\d+);", context)
                if mode == "first_bump" and bumps:
                    return f"#{bumps[0][0]},{bumps[0][1]};"
                return "#0,0;"
            ids = tok(context, add_special_tokens=False)["input_ids"]
            return actor.sample([ids], n=1, sampling=greedy).extras["texts"][0]

        return act

    for mode in ("none", "constant", "first_bump"):
        played = [
            play_text(task.env(e), e, 0, act_with(mode), attempts=2, reflect=mode != "none")
            for e in examples
        ]
        p1 = sum(p.successes_by_attempt[0] for p in played) / len(played)
        p2 = sum(p.success for p in played) / len(played)
        print(f"memo {mode}: pass@1 {p1:.3f}  pass@2 {p2:.3f}  (n={len(played)})")


def main(arena: str, actor_folder: str, a: str, b: str, n: str = "50") -> None:
    torch.set_num_threads(1)
    actor = _policy(actor_folder)
    scores: dict[str, dict[int, dict[str, float]]] = {a: {}, b: {}}
    for algo in (a, b):
        for run in sorted(Path(arena, "runs").glob(f"{algo}-s*")):
            if run.name.rsplit("-s", 1)[0] == algo and (run / "model").exists():
                scores[algo][int(run.name.rsplit("-s", 1)[1])] = memo_scores(run, actor, int(n))
    for key in ("names_bump", "names_hidden", "pass@2"):
        first = {s: v[key] for s, v in scores[a].items()}
        second = {s: v[key] for s, v in scores[b].items()}
        for name, values in ((a, first), (b, second)):
            i = mean_ci(list(values.values()))
            print(f"{name} {key}: {i.mean:.3f} [{i.low:.3f}, {i.high:.3f}] (n={i.n})")
        d = paired_difference_ci(first, second)
        print(f"{a} − {b} {key}: {d.mean:+.3f} [{d.low:+.3f}, {d.high:+.3f}] (paired, n={d.n})")


if __name__ == "__main__":
    if sys.argv[1] == "ceiling":
        ceiling(*sys.argv[2:])
    else:
        main(*sys.argv[1:])
