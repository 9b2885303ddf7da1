"""FLAG-Trader (papers/seed_agents.md §A5): a partially fine-tuned language model as the
actor-critic of a trading agent, trained by PPO with GAE over time in the `trade_sim`
market (envs/trade_sim.py), and its full fine-tuning ablation.

Both run on the control trainer (`policylab train --algo flag_trader --task
policylab/TradeSim-v0`): the `lm_control` policy kind (policies/lm_control.py) is the LM
with its restricted head, a row is one decision, and the loop is PPO's. The paper's PPO
constants, split point and reward were not retrieved (§B): every value is [ours] or
[2nd], which `policylab describe flag_trader` says in its notes.
"""

from __future__ import annotations

from policylab.recipes.base import PPO_CLIP_FORMULA, Recipe, S, add
from policylab.recipes.control import ONE_ROW_PER_STEP

_FORMULA = (
    "h = LM(text(s_t))[last];  π(a|s) = softmax(W_P·h)_a over a ∈ {B, S, H}, W_P ← "
    "embedding rows of B, S, H;  V = w_V·h + b\n"
    "r_t = log(V_{t+1}/V_t);  δ_t = r_t + γ·V(s_{t+1}) − V(s_t);  Â_t = δ_t + γλ·Â_{t+1};  "
    "A = whiten(Â)\n"
    f"{PPO_CLIP_FORMULA}\n"
    "+ vf_coef · ½·max((V − ret)², (clip(V, V_old ± ε_v) − ret)²),  ret = Â + V"
)
_ADVANTAGE = {
    "gamma": S(0.99, "[ours, §A5] control default γ (paper's value not retrieved)"),
    "lam": S(0.95, "[ours, §A5] control default λ"),
    "whiten": S(True, "[ours] advantages standardised per minibatch (control trainer)"),
}
_LOSS = {
    "eps_low": S(0.2, "[ours, §A5] PPO's ε 0.2 (paper's value not retrieved)"),
    "eps_high": S(0.2, "[ours] symmetric clip"),
    "loss_agg_mode": ONE_ROW_PER_STEP,
}
_VALUE = {"clip": S(0.2, "[ours, §A5] value clip ε_v 0.2 (config value_clip overrides)")}
_NOTES = (
    "Provisional values: the paper's text was not read and no official code exists "
    "(seed_agents.md §B); the split point, PPO constants, reward r_t = log(V_{t+1}/V_t) "
    "and the restricted head are our reading of secondary summaries. The third-party "
    "8park/flag-trader computes its log-probs under no_grad and is not a reference.",
    "Control trainer only: `policylab train --algo flag_trader --task "
    "policylab/TradeSim-v0` (the 7-number state is written as the text "
    "`+3-1+2+0+4-2|1:` for the LM); MLP PPO on the same numbers is `--algo ppo`.",
    "Untestable here: the transfer of a large LLM's financial knowledge (the tiny model "
    "has none); only the LM-as-policy-network mechanism is exercised.",
)

FLAG_TRADER = add(
    Recipe(
        name="flag_trader",
        title="FLAG-Trader: a partially fine-tuned LM as an actor-critic trading policy",
        paper="Xiong et al. 2025, arXiv:2502.11433 (ACL 2025); no official code",
        formula=_FORMULA,
        advantage="gae",
        loss="ppo_clip",
        policy="lm_control",
        advantage_options=_ADVANTAGE,
        loss_options=_LOSS,
        value_loss="value_clip",
        value_options=_VALUE,
        training={
            "model": S("tiny", "[ours] the shipped 0.87 M-parameter model (no downloads)"),
            "trainable_layers": S(
                2, "[ours, §A5] top 2 of 4 layers + final norm + heads (paper: top layers)"
            ),
        },
        notes=_NOTES,
    )
)

add(
    Recipe(
        name="lm_ppo_full",
        title="FLAG-Trader's ablation: the same LM actor-critic, every parameter trained",
        paper=FLAG_TRADER.paper + " — full fine-tuning baseline (seed_agents.md §A5 arena)",
        formula=_FORMULA + "\nevery parameter trained (embeddings and all layers)",
        advantage="gae",
        loss="ppo_clip",
        policy="lm_control",
        advantage_options=_ADVANTAGE,
        loss_options=_LOSS,
        value_loss="value_clip",
        value_options=_VALUE,
        training={
            "model": FLAG_TRADER.training["model"],
            "trainable_layers": S(None, "[ours, §A5 arena] full fine-tuning"),
        },
        notes=_NOTES[:1],
    )
)
