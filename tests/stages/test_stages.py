"""Method stages: the registry, option checks before any model loads, the pipeline each
recipe builds, and state that survives a checkpoint."""

import copy

import pytest
import torch

from policylab.config import TrainConfig
from policylab.recipes.compose import components
from policylab.rollouts import Rollouts
from policylab.stages import KINDS, Budget, Stage, build_pipeline, stages


def _pipeline(**fields):
    cfg = TrainConfig(**fields)
    parts = components(
        cfg.algo,
        max_new_tokens=cfg.max_new_tokens,
        loss_overrides=cfg.loss,
        selection=cfg.selection,
        selection_overrides=cfg.selection_options,
    )
    return build_pipeline(cfg, parts, pool_size=20)


def test_every_registered_stage_declares_a_kind_options_and_state():
    assert {"uniform", "vade", "vas", "offline", "step_labels", "difficulty"} <= set(stages.names())
    for name in stages.names():
        cls = stages.get(name)
        assert issubclass(cls, Stage) and cls.kind in KINDS and cls.name == name
        assert stages.entry(name).config is cls.Options


@pytest.mark.parametrize(
    ("algo", "kinds"),
    [
        ("grpo", {"prompts": "uniform"}),
        ("dapo", {"prompts": "uniform", "filter": "dynamic_sampling"}),
        ("d3s", {"prompts": "uniform", "advantages": "d3s"}),
        ("capo", {"prompts": "uniform", "learn": "capo"}),
        ("vade", {"prompts": "vade"}),
        ("vas", {"prompts": "vas"}),
        ("bcpg_nsa", {"prompts": "uniform", "annotate": "step_labels"}),
    ],
)
def test_each_recipe_names_its_stages(algo, kinds):
    pipeline = _pipeline(algo=algo)
    assert {s.kind: s.name for s in pipeline} == kinds


def test_configured_stages_replace_the_recipes():
    pipeline = _pipeline(algo="vade", sampler="uniform", augment="difficulty")
    assert {s.kind: s.name for s in pipeline} == {"prompts": "uniform", "augment": "difficulty"}
    assert [s.name for s in _pipeline(algo="grpo", offline_prompts=4)] == ["offline"]


def test_bad_stage_names_and_options_fail_before_any_work_naming_the_choices():
    with pytest.raises(ValueError, match=r"unknown prompts stage 'thompson'.*uniform.*vade.*vas"):
        TrainConfig(sampler="thompson")
    with pytest.raises(ValueError, match=r"unknown augment stage 'noise'.*difficulty"):
        TrainConfig(augment="noise")
    with pytest.raises(ValueError, match=r"unknown option\(s\) lambda_; valid options: alpha"):
        _pipeline(algo="vas", sampler_options={"lambda_": 0.5})
    with pytest.raises(ValueError, match=r"unknown option\(s\) fraction; valid options: \(none\)"):
        _pipeline(algo="grpo", sampler_options={"fraction": 0.5})
    with pytest.raises(ValueError, match=r"VAS every = 0"):
        _pipeline(algo="vas", sampler_options={"every": 0})
    with pytest.raises(ValueError, match=r"unknown option\(s\) size; valid options: "):
        _pipeline(algo="grpo", augment="difficulty", augment_options={"size": 3})


def test_recipe_defaults_reach_their_stage_and_overrides_win():
    vas = _pipeline(algo="vas", sampler_options={"every": 7}).prompts
    assert vas.options.every == 7 and vas.sampler.every == 7
    assert vas.options.n_score == 8


def test_stage_state_round_trips_through_a_checkpoint():
    """A VADE stage restored from another's state draws exactly what the original does."""
    a = _pipeline(algo="vade", seed=3).prompts
    for _ in range(3):
        idx = a.sample(4)
        a.update(idx, torch.tensor([1.0, 0.0] * 8))
    b = _pipeline(algo="vade", seed=99).prompts
    b.load_state_dict(copy.deepcopy(a.state_dict()))
    assert [a.sample(4) for _ in range(3)] == [b.sample(4) for _ in range(3)]


def test_capo_stage_keeps_its_curvature_state_in_the_checkpoint():
    pipeline = _pipeline(algo="capo")
    state = pipeline.state_dict()
    assert set(state) == {"uniform", "capo"}
    assert state["capo"]["t"] == 0 and len(state["capo"]["ids"]) == 0  # CAPO's Adam model
    assert pipeline.token_mask.state is not None


def test_advantage_selector_drops_rows_and_reports_its_metrics():
    pipeline = _pipeline(algo="d3s")
    B, T = 8, 3
    batch = Rollouts(
        rewards=torch.tensor([1.0, 0, 1, 0, 1, 1, 0, 0]),
        response_mask=torch.ones(B, T),
        group_ids=torch.arange(2).repeat_interleave(4),
        entropy=torch.rand(B, T, generator=torch.Generator().manual_seed(0)),
    )
    adv = torch.tensor([1.0, -1, 1, -1, 0.5, 0.5, -0.5, -0.5]).unsqueeze(-1).expand(B, T)
    kept, kept_adv = pipeline.select(batch, adv, step=0, total_steps=10)
    assert len(kept) == 4 and kept_adv.shape == (4, T)  # f_s = 0.5 at the start
    assert pipeline.metrics()  # D³S's own counts


def test_budget_charges_and_round_trips():
    budget = Budget()
    budget.charge(16, 120)
    budget.charge(4)
    assert budget.as_metrics() == {"budget/samples": 20, "budget/tokens": 120}
    other = Budget()
    other.load_state_dict(budget.state_dict())
    assert other == budget


def test_components_declare_what_they_read_and_composition_adds_the_annotators():
    assert [s.name for s in _pipeline(algo="empg").annotators] == ["line_segments"]
    assert [s.name for s in _pipeline(algo="copo").annotators] == ["answers"]
    # BCPG-NSA's judged steps also number the segments: one annotator provides both
    assert [s.name for s in _pipeline(algo="bcpg_nsa").annotators] == ["step_labels"]
    assert _pipeline(algo="bcpg_nsa", loss={"beta": 1.0}).annotators == []  # plain BCPG
    assert _pipeline(algo="grpo").annotators == []


def test_a_column_nobody_provides_fails_before_any_work_naming_the_component():
    from types import SimpleNamespace

    from policylab.stages.pipeline import WORKFLOW_COLUMNS, annotators_for

    def part(name, reads=()):
        return SimpleNamespace(name=name, options=SimpleNamespace(reads=reads))

    parts = SimpleNamespace(
        advantage=part("grpo"), loss=part("oracle", ("oracle_hint",)), selection=part("all")
    )
    with pytest.raises(ValueError, match=r"loss 'oracle' reads 'oracle_hint'.*answers"):
        annotators_for(parts, WORKFLOW_COLUMNS)


def test_annotators_add_their_columns_to_a_round():
    from types import SimpleNamespace

    from policylab.models import build_tokenizer
    from policylab.stages import stages as registry
    from policylab.workflows.single_turn import RolloutInfo

    tokenizer = build_tokenizer()
    text = "12\n<answer>7</answer>"
    ids = torch.tensor([tokenizer.encode(text, add_special_tokens=False)])
    batch = Rollouts(rewards=torch.ones(1), response_mask=torch.ones(ids.shape), response_ids=ids)
    info = RolloutInfo([text], ["p"], {}, ids.shape[1], 0.0, 0.0)
    flow = SimpleNamespace(tokenizer=tokenizer)
    answers = registry.get("answers")(None).annotate(batch, [{}], info, flow)
    assert answers.extras["answers"] == ["7"]
    lines = registry.get("line_segments")(None).annotate(batch, [{}], info, flow)
    assert lines.segment_ids[0, 0] == 0 and lines.segment_ids[0, -1] == 1


def test_offline_data_and_augmentation_refuse_a_prompt_sampler_s_settings():
    with pytest.raises(ValueError, match="offline_prompts=4 draws its prompts uniformly"):
        _pipeline(algo="vade", offline_prompts=4)
    with pytest.raises(ValueError, match="use sampler=uniform without sampler_options"):
        _pipeline(algo="grpo", offline_prompts=4, sampler_options={"fraction": 0.5})
    with pytest.raises(ValueError, match="augment=difficulty draws its prompts uniformly"):
        _pipeline(algo="vas", augment="difficulty")
    with pytest.raises(ValueError, match="unknown prompts stage 'offline'; choices: uniform, "):
        _pipeline(algo="grpo", sampler="offline")  # offline_prompts=N chooses it


def test_a_checkpoint_from_before_stages_maps_onto_the_stages_by_kind():
    pipeline = _pipeline(algo="capo")
    legacy = {"sampler": {"position": 3}, "curvature": {"t": 2}, "augmenter": None}
    assert pipeline.legacy_state(legacy) == {"uniform": {"position": 3}, "capo": {"t": 2}}
    with pytest.raises(ValueError, match=r"no state for stage\(s\) capo \(it holds uniform\)"):
        pipeline.load_state_dict({"uniform": {}})
