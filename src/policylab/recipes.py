"""Named algorithms: a recipe bundles registered components with paper-faithful defaults,
each default carrying its source (papers/seed_llm_algorithms.md; [paper §x] the paper's
text, [code repo] the reference implementation, [ours] our choice where both are silent).

`policylab describe NAME` prints a recipe; `policy_loss(NAME)` / `advantages(NAME)` give its
components with these defaults. `training` holds the paper's own run settings (model-scale
numbers such as lr 1e-6 for 7B models): the trainer reads the ones that transfer (samples
per prompt, inner epochs, clip ranges) and documents where it departs from them.
"""

from __future__ import annotations

import dataclasses
import types
from dataclasses import dataclass, field
from typing import Any

from policylab.registry import Registry


@dataclass(frozen=True)
class Setting:
    """A default value and where it comes from."""

    value: Any
    source: str


def S(value: Any, source: str) -> Setting:  # noqa: N802 - short constructor for the tables
    return Setting(value, source)


@dataclass(frozen=True)
class Recipe:
    name: str
    title: str
    paper: str
    formula: str
    advantage: str
    loss: str
    advantage_options: dict[str, Setting] = field(default_factory=dict)
    loss_options: dict[str, Setting] = field(default_factory=dict)
    selection: str | None = None  # None: every row ("all")
    selection_options: dict[str, Setting] = field(default_factory=dict)
    sampler: str | None = None  # the prompt sampler; None: uniform (samplers.py)
    sampler_options: dict[str, Setting] = field(default_factory=dict)
    reward_shaping: dict[str, dict[str, Setting]] = field(default_factory=dict)
    value_loss: str | None = None
    value_options: dict[str, Setting] = field(default_factory=dict)
    training: dict[str, Setting] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    policy: str = "mlp"  # control network: mlp, flow (fpo) or pg_rainbow (IQN critic)

    @property
    def kl(self) -> str:
        """Where the KL to the reference sits: in the loss, in the reward, or nowhere."""
        parts = []
        loss_coef = _value(self.loss_options, "kl_coef", 0.0)
        if loss_coef:
            est = _value(self.loss_options, "kl_estimator", None)
            parts.append(f"{est} in the loss, β={loss_coef}")
        reward_coef = _value(self.advantage_options, "kl_coef", 0.0)
        if reward_coef:
            est = _value(self.advantage_options, "kl_estimator", "k1")
            parts.append(f"{est} in the reward, β={reward_coef}")
        if not parts and self._loss_needs_reference():
            parts.append("a constraint in the loss (see the formula)")
        return "; ".join(parts) or "none (no reference model)"

    def _loss_needs_reference(self) -> bool:
        """Whether the loss, with this recipe's options, reads a reference (e.g. BCPG)."""
        from policylab.algebra.catalogue import policy_losses

        config = policy_losses.entry(self.loss).config
        needs = getattr(config, "needs_reference", None)
        if not isinstance(needs, property):
            return False
        # read the property on the recipe's values without validating them (Dr. GRPO's
        # L_max is only known from the run's max_new_tokens)
        values = {f.name: f.default for f in dataclasses.fields(config)}
        values.update(self.component_defaults("loss"))
        return bool(needs.fget(types.SimpleNamespace(**values)))

    @property
    def needs_reference(self) -> bool:
        return self.kl != "none (no reference model)"

    def component_defaults(self, kind: str) -> dict[str, Any]:
        """Plain option values for one component kind: "advantage", "loss", "value",
        "selection" or "sampler"."""
        table = {
            "advantage": self.advantage_options,
            "loss": self.loss_options,
            "value": self.value_options,
            "selection": self.selection_options,
            "sampler": self.sampler_options,
        }[kind]
        return {k: s.value for k, s in table.items()}

    @property
    def defaults(self) -> dict[str, Any]:
        """Every default, flattened as "component.option" → value."""
        return {key: s.value for key, s in self._settings().items()}

    @property
    def citations(self) -> dict[str, str]:
        """Every default's source, keyed like `defaults`."""
        return {key: s.source for key, s in self._settings().items()}

    def _settings(self) -> dict[str, Setting]:
        out: dict[str, Setting] = {}
        for prefix, table in (
            (f"advantage.{self.advantage}", self.advantage_options),
            (f"loss.{self.loss}", self.loss_options),
            (f"value.{self.value_loss}", self.value_options),
            (f"selection.{self.selection}", self.selection_options),
            (f"sampler.{self.sampler}", self.sampler_options),
            ("training", self.training),
        ):
            out.update({f"{prefix}.{k}": s for k, s in table.items()})
        for shaper, table in self.reward_shaping.items():
            out.update({f"reward_shaping.{shaper}.{k}": s for k, s in table.items()})
        return out


def _value(table: dict[str, Setting], key: str, default: Any) -> Any:
    return table[key].value if key in table else default


recipes: Registry[Recipe] = Registry("algorithm")


def add(recipe: Recipe) -> Recipe:
    recipes.add(recipe.name, recipe, summary=f"{recipe.title} — {recipe.paper}")
    return recipe


def get(name: str) -> Recipe:
    return recipes.get(name)


def names() -> list[str]:
    return recipes.names()


_PPO_CLIP_FORMULA = "L = max(−A·r, −A·clip(r, 1−ε_low, 1+ε_high)),  r = exp(logp − old_logp)"

add(
    Recipe(
        name="ppo",
        title="Proximal Policy Optimization with GAE",
        paper="Schulman et al. 2017, arXiv:1707.06347 (GAE: arXiv:1506.02438)",
        formula=(
            "δ_t = ρ_t + γ·V_{t+1} − V_t;  Â_t = δ_t + γλ·Â_{t+1};  A = whiten(Â)\n"
            f"{_PPO_CLIP_FORMULA}\n"
            "L_v = ½·max((V − ret)², (clip(V, V_old ± ε_v) − ret)²),  ret = Â + V"
        ),
        advantage="gae",
        loss="ppo_clip",
        advantage_options={
            "gamma": S(
                0.99,
                "[paper App. A, Table 3] discount 0.99 (MuJoCo); language models use 1.0 [code verl]",
            ),
            "lam": S(
                0.95,
                "[paper App. A, Table 3] GAE parameter 0.95; language models use 1.0 [code verl]",
            ),
            "whiten": S(
                True, "[code verl masked_whiten, OpenRLHF] advantages standardised over the batch"
            ),
        },
        loss_options={
            "eps_low": S(0.2, "[paper §6.1] ε = 0.2 scored best among the clip settings compared"),
            "eps_high": S(0.2, "[paper §6.1] symmetric clip"),
            "loss_agg_mode": S(
                "token-mean",
                "[code verl] default aggregation; one token = one time step in control",
            ),
        },
        value_loss="value_clip",
        value_options={
            "clip": S(
                0.5,
                "[code verl cliprange_value, OpenRLHF value_clip] from OpenAI baselines; not in the paper",
            ),
        },
        training={
            "epochs": S(10, "[paper App. A, Table 3] 10 epochs per batch (MuJoCo)"),
            "minibatch_size": S(64, "[paper App. A, Table 3] minibatch 64 (MuJoCo)"),
            "lr": S(3e-4, "[paper App. A, Table 3] Adam step size 3e-4 (MuJoCo)"),
            "horizon": S(2048, "[paper App. A, Table 3] 2048 steps per rollout (MuJoCo)"),
        },
    )
)

add(
    Recipe(
        name="fpo",
        title="Flow Policy Optimization (PPO-clip for a flow-matching action policy)",
        paper="McAllister et al. 2025, Flow Matching Policy Gradients, arXiv:2507.21053",
        formula=(
            "x^τ = τ·a + (1 − τ)·ε,  u = a − ε;  ℓ[k] = w(τ_k)·mean_d (v̂(x^τ_k, τ_k, o) − u_k)²\n"
            "logp := −mean_k ℓ_θ[k],  old_logp := −mean_k ℓ_old[k]  (draws stored at rollout)\n"
            f"{_PPO_CLIP_FORMULA}  = clip of exp(L̂_old − L̂_θ)\n"
            "A = GAE(γ, λ), standardised;  L_v = ½·(V − ret)²;  no entropy bonus"
        ),
        advantage="gae",
        loss="ppo_clip",
        policy="flow",
        advantage_options={
            "gamma": S(0.99, "[code fpo:gridworld] γ = 0.99 (playground 0.995)"),
            "lam": S(0.95, "[code fpo:playground] GAE λ = 0.95"),
            "whiten": S(True, "[code fpo:playground, gridworld] advantages standardised"),
        },
        loss_options={
            "eps_low": S(0.05, "[code fpo:playground] clip 0.05 (its Gaussian PPO uses 0.3)"),
            "eps_high": S(0.05, "[code fpo:playground] symmetric clip"),
            "loss_agg_mode": S("token-mean", "[ours] one row per step, mean over steps"),
        },
        value_loss="value_clip",
        value_options={
            "clip": S(None, "[code fpo:playground] unclipped value regression"),
        },
        training={
            "n_mc": S(8, "[code fpo:playground n_samples_per_action] 8 (τ, ε) draws per action"),
            "flow_steps": S(10, "[code fpo:playground flow_steps] 10 Euler steps"),
            "cfm_reduce": S("mean", "[code fpo:playground, gridworld] mean over action dims"),
            "cfm_weight": S(
                "tau_sq", "[code fpo:playground] noise supervision = velocity loss × τ² (§16.2)"
            ),
            "tau_sampling": S("grid", "[code fpo:playground discretize_t_for_training]"),
            "cfm_scale": S(1.0, "[code fpo:playground] no scale (PHC's σ = 0.05 ≙ 200)"),
            "ratio": S(
                "avg_before_exp",
                "[paper §3; code fpo:playground average_losses_before_exp=True]",
            ),
        },
        notes=(
            "Control only (`policylab train --algo fpo --task Pendulum-v1`): the ratio "
            "exp(L̂_old − L̂_θ) is `ppo_clip`'s exp(logp − old_logp) with logp = −L̂.",
            "Per-draw ratio mode and the optional ±3 log-ratio clamp (§16.2) are not built.",
        ),
    )
)

add(
    Recipe(
        name="pg_rainbow",
        title="PG-Rainbow (PPO whose value baseline reads an IQN return distribution)",
        paper="Jeon, Lee, Lee 2024, PG-Rainbow, arXiv:2407.13146 (IQN: arXiv:1806.06923)",
        formula=(
            "Z_τ(s, a) = g(ψ(s) ⊙ ReLU(Σ_i cos(π·i·τ)·W_i + b))_a;  "
            "ρ_ij = |τ_i − 1{δ_ij < 0}|·L_κ(δ_ij)/κ\n"
            "δ_ij = r + γ(1 − done)·Z'_{τ'_j}(s', a*) − Z_{τ_i}(s, a);  "
            "L_IQN = mean_b (1/N')·Σ_ij ρ_ij  (replay, target net)\n"
            "q_j(s) = Σ_a π(a|s)·Z_{τ̂_j}(s, a), τ̂_j = (2j − 1)/2N;  V_ψ = f_ψ([V_θ(s), q(s)])\n"
            f"A = GAE(γ, λ) on V_ψ;  {_PPO_CLIP_FORMULA};  L_v = ½·(V_ψ − ret)²"
        ),
        advantage="gae",
        loss="ppo_clip",
        policy="pg_rainbow",
        advantage_options={
            "gamma": S(
                0.99, "[ours] Atari PPO γ (papers §17.5); the paper's values were not retrieved"
            ),
            "lam": S(0.95, "[ours] Atari PPO λ (papers §17.5)"),
            "whiten": S(True, "[ours] as ppo"),
        },
        loss_options={
            "eps_low": S(0.2, "[ours] ppo's ε so a comparison isolates the critic (§17.5: 0.1)"),
            "eps_high": S(0.2, "[ours] symmetric clip"),
            "loss_agg_mode": S("token-mean", "[ours] one row per step, mean over steps"),
        },
        value_loss="value_clip",
        value_options={"clip": S(None, "[ours] unclipped regression of V_ψ and V_θ")},
        training={
            "pgr_quantiles": S(
                32, "[ours] N fed to PPO (papers §17.2, §17.5; ablated in the paper)"
            ),
            "pgr_input": S(
                "concat",
                "[ours] [V_θ, q] into a linear f_ψ started at V_θ; §17.2 defaults to scaled "
                "V_θ·q, whose scale is the return squared",
            ),
            "iqn_cosines": S(64, "[code dopamine quantile_embedding_dim=64] IQN §3"),
            "iqn_kappa": S(1.0, "[code dopamine] κ = 1 (IQN)"),
            "iqn_n_tau": S(32, "[code dopamine default agent] N = 32"),
            "iqn_n_tau_target": S(32, "[code dopamine default agent] N' = 32"),
            "iqn_n_tau_select": S(32, "[code dopamine default agent] K = 32"),
            "iqn_lr": S(5e-4, "[ours] Dopamine's 5e-5 is for 50M-frame Atari runs"),
            "iqn_adam_eps": S(3.125e-4, "[code dopamine] Adam ε"),
            "iqn_steps": S(16, "[ours] IQN steps per PPO iteration (M of §17.4)"),
            "iqn_batch": S(64, "[ours] replay minibatch"),
            "iqn_target_every": S(100, "[ours] target sync in IQN steps (Dopamine: 10k)"),
            "replay_capacity": S(100_000, "[ours] a CartPole run's length (Dopamine: 1e6)"),
            "replay_min": S(1_000, "[ours] V_θ alone until this many transitions (papers §17.7)"),
        },
        notes=(
            "Control only, discrete actions (`policylab train --algo pg_rainbow --task "
            "CartPole-v1`). The IQN target uses the greedy a*, so it models the greedy "
            "policy's return; f_ψ learns how much of it to use (§17.2 caveat).",
            "The IQN trains after each iteration's PPO epochs, so V_ψ in GAE reads an IQN "
            "trained on all earlier batches (§17.4 trains it before GAE, on this one too).",
        ),
    )
)

add(
    Recipe(
        name="grpo",
        title="Group Relative Policy Optimization",
        paper="Shao et al. 2024, DeepSeekMath, arXiv:2402.03300",
        formula=(
            "A_i = (R_i − mean_g R) / (std_g R + eps)   (broadcast to the row's tokens)\n"
            f"{_PPO_CLIP_FORMULA}\n"
            "loss = seq-mean-token-mean(L + β·k3(logp, ref_logp))"
        ),
        advantage="grpo",
        loss="ppo_clip",
        advantage_options={
            "scale": S("group", "[paper §4.1.2] rewards normalised by the group's mean and std"),
            "eps": S(
                1e-6, "[code verl compute_grpo_outcome_advantage] epsilon=1e-6; the paper has none"
            ),
        },
        loss_options={
            "eps_low": S(0.2, "[code verl clip_ratio, TRL epsilon] the paper states no ε"),
            "eps_high": S(0.2, "[code verl, TRL] symmetric clip"),
            "loss_agg_mode": S("seq-mean-token-mean", "[paper eq. 3] (1/G)Σ_i (1/|o_i|)Σ_t"),
            "kl_estimator": S("k3", "[paper eq. 4] unbiased estimator π_ref/π − log(π_ref/π) − 1"),
            "kl_coef": S(0.04, "[paper §4.2] KL coefficient 0.04"),
        },
        training={
            "samples_per_prompt": S(64, "[paper §4.2] 64 outputs sampled per question"),
            "lr": S(1e-6, "[paper §4.2] policy learning rate 1e-6 (7B model)"),
            "epochs": S(1, "[paper §4.2] a single update per exploration stage"),
            "max_new_tokens": S(1024, "[paper §4.2] max length 1024"),
        },
    )
)

add(
    Recipe(
        name="dr_grpo",
        title="Dr. GRPO (GRPO done right)",
        paper="Liu et al. 2025, Understanding R1-Zero-Like Training, arXiv:2503.20783",
        formula=(
            "A_i = R_i − mean_g R   (no std division)\n"
            f"{_PPO_CLIP_FORMULA}\n"
            "loss = Σ_{i,t} m·L / (B · L_max)   (a constant, not the response length)"
        ),
        advantage="dr_grpo",
        loss="ppo_clip",
        loss_options={
            "eps_low": S(0.2, "[ours] PPO default; the paper does not restate ε"),
            "eps_high": S(0.2, "[ours] symmetric clip"),
            "loss_agg_mode": S(
                "seq-mean-token-sum-norm",
                "[paper Listing 1] masked sum ÷ MAX_TOKENS, then mean over rows",
            ),
            "L_max": S(
                None,
                "[paper Listing 1] the generation budget: the trainer sets it to max_new_tokens; direct callers must pass L_max",
            ),
            "kl_coef": S(0.0, "[paper §3, after eq. 1] no KL term (β = 0)"),
        },
        training={
            "samples_per_prompt": S(8, "[code understand-r1-zero examples] 8 samples per prompt"),
            "lr": S(1e-6, "[code understand-r1-zero examples] lr 1e-6"),
            "epochs": S(1, "[code understand-r1-zero examples] one PPO epoch"),
        },
    )
)

add(
    Recipe(
        name="dapo",
        title="Decoupled Clip and Dynamic sAmpling Policy Optimization",
        paper="Yu et al. 2025, DAPO, arXiv:2503.14476",
        formula=(
            "keep group g iff 0 < #correct_g < G (std_g acc > 0); refill until N groups (eq. 11)\n"
            "A_i = (R_i − mean_g R) / (std_g R + eps);  R_i += overlong penalty (eq. 13)\n"
            f"{_PPO_CLIP_FORMULA}  with ε_low=0.2, ε_high=0.28\n"
            "loss = token-mean(L) over all tokens of the batch (eq. 12)"
        ),
        advantage="grpo",
        loss="ppo_clip",
        advantage_options={
            "scale": S("group", "[paper eq. 9] group-normalised advantage as in GRPO"),
            "eps": S(1e-6, "[code verl] epsilon=1e-6"),
        },
        loss_options={
            "eps_low": S(0.2, "[paper §4.1] ε_low = 0.2"),
            "eps_high": S(0.28, "[paper §4.1] ε_high = 0.28 (clip-higher, §3.1)"),
            "loss_agg_mode": S("token-mean", "[paper eq. 12] token-level policy gradient loss"),
            "dual_clip_c": S(
                10.0,
                "[code verl recipe/dapo script clip_ratio_c=10.0] not in the paper; inactive unless r > 10",
            ),
            "kl_coef": S(0.0, "[paper §2.3] KL penalty removed"),
        },
        selection="dynamic_sampling",
        selection_options={
            "metric": S(
                None,
                "[code verl filter_groups.metric=acc] filter on accuracy, not the shaped score (paper eq. 11); our verifiers' unshaped total reward unless a reward part is named 'acc' [ours]",
            ),
        },
        reward_shaping={
            "overlong": {
                "L_max": S(20480, "[paper §4.1] maximum generation length 20480"),
                "L_cache": S(4096, "[paper §4.1] 4096 tokens of soft-punishment cache"),
                "factor": S(1.0, "[code verl overlong_penalty_factor] 1.0; eq. 13 implies 1"),
            }
        },
        training={
            "samples_per_prompt": S(16, "[paper §4.1] 16 responses per prompt"),
            "prompts_per_step": S(512, "[paper §4.1] prompt batch 512"),
            "minibatch_size": S(
                512, "[paper §4.1] mini-batch 512 responses, 16 updates per rollout"
            ),
            "lr": S(1e-6, "[paper §4.1] constant lr 1e-6"),
            "warmup_steps": S(20, "[paper §4.1] linear warm-up over 20 rollout steps"),
            "max_gen_rounds": S(
                10, "[code verl max_num_gen_batches=10] ≤ 0 unlimited; the paper is silent"
            ),
            "gen_prompts_per_round": S(
                1536,
                "[code verl gen_prompt_bsz = 3·512] paper silent; policylab draws prompts_per_step prompts per round [ours]",
            ),
            "on_exhaust": S("raise", "[code verl] an error when the rounds run out"),
        },
        notes=(
            "Dynamic sampling: each step generates rounds of prompts_per_step prompts × G, "
            "drops groups whose accuracy is all equal, and stops once prompts_per_step groups "
            "are kept (TrainConfig max_gen_rounds, on_exhaust); every generated sample is "
            "charged to the run's budget. `selection=dynamic_sampling` adds it to any algorithm.",
            "Overlong shaping is added to the kept rows' rewards after the filter (which reads "
            "the unshaped accuracy) and before the advantage. With the paper's L_max = 20480 "
            "it is 0 at CPU lengths; scale it to the run, e.g. "
            "reward_shaping='{overlong: {L_max: 64, L_cache: 16}}' for max_new_tokens=64.",
        ),
    )
)

add(
    Recipe(
        name="gspo",
        title="Group Sequence Policy Optimization",
        paper="Zheng et al. 2025, GSPO, arXiv:2507.18071",
        formula=(
            "A_i = (R_i − mean_g R) / (std_g R + eps)\n"
            "s_i = exp( (1/|o_i|) Σ_t (logp − old_logp) )\n"
            "L_i = max(−A_i·s_i, −A_i·clip(s_i, 1−ε_low, 1+ε_high));  loss = mean_i L_i"
        ),
        advantage="grpo",
        loss="gspo",
        advantage_options={"scale": S("group", "[paper §4.1] group-based advantage as in GRPO")},
        loss_options={
            "eps_low": S(3e-4, "[paper §5.1] left clipping range 3e-4"),
            "eps_high": S(4e-4, "[paper §5.1] right clipping range 4e-4"),
            "loss_agg_mode": S(
                "seq-mean-token-mean", "[paper eq. 5] (1/G)Σ_i over sequence ratios; verl, OpenRLHF"
            ),
            "kl_coef": S(0.0, "[code TRL paper index, citing the authors] no KL term"),
        },
        training={"minibatches": S(4, "[paper §5.1] each rollout batch split into 4 mini-batches")},
    )
)

add(
    Recipe(
        name="cispo",
        title="Clipped IS-weight Policy Optimization",
        paper="MiniMax 2025, MiniMax-M1, arXiv:2506.13585",
        formula=(
            "A_i = (R_i − mean_g R) / (std_g R + eps)\n"
            "w = sg[clip(r, 1−ε_low, 1+ε_high)];  L = −w·A·logp;  loss = token-mean(L)"
        ),
        advantage="grpo",
        loss="cispo",
        advantage_options={"scale": S("group", "[paper §3.1] group-relative advantage as in GRPO")},
        loss_options={
            "eps_low": S(
                None, "[paper §3.1] the lower bound is effectively disabled (large ε_low)"
            ),
            "eps_high": S(0.2, "[ours] the paper gives no number; matches verl's cispo example"),
            "loss_agg_mode": S("token-mean", "[paper §3.1] normalised by the total token count"),
            "kl_coef": S(0.0, "[paper §3.1] no KL term"),
        },
    )
)

add(
    Recipe(
        name="rloo",
        title="REINFORCE Leave-One-Out",
        paper="Ahmadian et al. 2024, Back to Basics, arXiv:2402.14740",
        formula=(
            "R_i ← R_i − β·Σ_t k1(old_logp, ref_logp)\n"
            "A_i = R_i − (1/(G−1))·Σ_{j≠i} R_j\n"
            f"{_PPO_CLIP_FORMULA}"
        ),
        advantage="rloo",
        loss="ppo_clip",
        advantage_options={
            "kl_coef": S(
                0.05,
                "[code TRL RLOOTrainer beta=0.05] sequence-level KL subtracted from the reward",
            ),
            "kl_estimator": S("k1", "[code TRL] Σ_t (old_logp − ref_logp)"),
        },
        loss_options={
            "eps_low": S(0.2, "[code TRL epsilon, OpenRLHF eps_clip] 0.2"),
            "eps_high": S(0.2, "[code TRL, OpenRLHF] symmetric clip"),
            "loss_agg_mode": S("token-mean", "[ours] token-mean as verl's default"),
        },
        training={
            "samples_per_prompt": S(
                4, "[ours] the paper runs RLOO with k = 2 and k = 4 samples; we take 4"
            )
        },
    )
)

add(
    Recipe(
        name="reinforce_pp",
        title="REINFORCE++",
        paper="Hu et al. 2025, REINFORCE++, arXiv:2501.03262",
        formula=(
            "ρ_t = −β·k1_t + R·[t = last];  G_t = Σ_{s≥t} γ^{s−t} ρ_s\n"
            "A = (G − mean) / std over every valid token of the batch\n"
            f"{_PPO_CLIP_FORMULA}"
        ),
        advantage="reinforce_pp",
        loss="ppo_clip",
        advantage_options={
            "kl_coef": S(0.01, "[code OpenRLHF --init_kl_coef default] paper value not verified"),
            "kl_estimator": S("k1", "[paper; code OpenRLHF default k1] per-token KL in the reward"),
            "gamma": S(1.0, "[code OpenRLHF, verl] γ = 1"),
            "unbiased": S(
                False, "[code OpenRLHF] population variance; verl uses Bessel (unbiased=True)"
            ),
        },
        loss_options={
            "eps_low": S(0.2, "[code OpenRLHF PolicyLoss] clip 0.2"),
            "eps_high": S(0.2, "[code OpenRLHF] symmetric clip"),
            "loss_agg_mode": S("token-mean", "[code OpenRLHF PolicyLoss] token-mean"),
        },
    )
)

add(
    Recipe(
        name="reinforce_pp_baseline",
        title="REINFORCE++ with group baseline",
        paper="Hu et al. 2025, REINFORCE++, arXiv:2501.03262",
        formula=(
            "c_i = R_i − mean_g R;  A = (c − mean) / std over every valid token of the batch\n"
            f"{_PPO_CLIP_FORMULA}\n"
            "loss = token-mean(L + β·k2(logp, ref_logp))"
        ),
        advantage="reinforce_pp_baseline",
        loss="ppo_clip",
        advantage_options={
            "unbiased": S(False, "[code OpenRLHF] population variance"),
        },
        loss_options={
            "eps_low": S(0.2, "[code OpenRLHF PolicyLoss] clip 0.2"),
            "eps_high": S(0.2, "[code OpenRLHF] symmetric clip"),
            "loss_agg_mode": S("token-mean", "[code OpenRLHF PolicyLoss] token-mean"),
            "kl_estimator": S(
                "k2", "[code OpenRLHF train_reinforce_baseline script] KL in the loss, k2"
            ),
            "kl_coef": S(1e-5, "[code OpenRLHF train_reinforce_baseline script] init_kl_coef 1e-5"),
        },
    )
)


# the selection (issue #7) and objective (issue #8) methods' recipes, in their own modules
from policylab import objective_recipes as _objective_recipes  # noqa: E402, F401
from policylab import selection_recipes as _selection_recipes  # noqa: E402, F401
