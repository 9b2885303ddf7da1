"""The control trainer's augmented step (trainers/augmented.py): the K-pass update is the
registered combination of the per-augmentation gradients, the run logs the mechanism
check, resumes exactly, and `policylab train` runs cg2a_ppo_provisional."""

import pytest
import torch

from policylab.algebra.gradient_combine import CombineOptions, combine
from policylab.cli import main
from policylab.config import ConfigError, ControlConfig, load
from policylab.policies.image_augment import augment_observations
from policylab.trainers.augmented import Augmenter, augmented_backward
from policylab.trainers.control import train
from policylab.trainers.run import read_metrics
from run_testing import assert_same_metrics

SHAPE = (32, 32, 3)
TINY = dict(
    task="policylab/VisualReach-v0",
    num_envs=4,
    num_steps=32,
    minibatch_size=64,
    epochs=1,
    eval_episodes=2,
    report_to=[],
    progress=False,
)


def observations(b=6):
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, 256, (b, 32 * 32 * 3), generator=g).double()


def toy_pass(w):
    """A loss whose gradient w.r.t. w [3] is the mean of each channel over the batch:
    different augmentations give different, sometimes conflicting, gradients."""

    def pass_loss(obs):
        channels = obs.reshape(-1, *SHAPE).mean(dim=(0, 1, 2)) / 255 - 0.45
        loss = (w * channels).sum()
        zero = torch.zeros((), dtype=w.dtype)
        return loss, zero, zero, {"pg/loss": float(loss.detach())}, {}

    return pass_loss


@pytest.mark.parametrize("how", ["mean", "cg2a_provisional", "min_norm", "soft_surgery"])
def test_k_pass_gradient_is_the_registered_combination(how):
    names = ("colour_jitter", "random_conv", "grayscale")
    options = CombineOptions(kappa=1.0)
    w = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    augmenter = Augmenter(names, how, options, SHAPE, False)
    obs = observations()
    augmented_backward(augmenter, toy_pass(w), obs, [w], torch.Generator().manual_seed(4))
    # the same draws by hand: each augmentation in turn, then the combiner's own
    g = torch.Generator().manual_seed(4)
    grads = []
    for name in names:
        x = augment_observations(name, obs, SHAPE, False, g).reshape(-1, *SHAPE)
        grads.append(x.mean(dim=(0, 1, 2)) / 255 - 0.45)
    expected = combine(how, torch.stack(grads), options, g)
    torch.testing.assert_close(w.grad, expected)


def test_one_augmentation_makes_every_combiner_the_plain_gradient():
    # K = 1: equal norm and surgery have nothing to balance or remove
    obs = observations()
    grads = []
    for how in ("per_row", "mean", "cg2a_provisional"):
        w = torch.zeros(3, dtype=torch.float64, requires_grad=True)
        augmenter = Augmenter(("grayscale",), how, CombineOptions(), SHAPE, False)
        augmented_backward(augmenter, toy_pass(w), obs, [w], torch.Generator().manual_seed(1))
        grads.append(w.grad)
    torch.testing.assert_close(grads[0], grads[1])
    torch.testing.assert_close(grads[0], grads[2])
    # grayscale: every channel the luminance, so the three entries agree
    assert torch.allclose(grads[0], grads[0][0].expand(3))


def test_mechanism_metrics_are_logged_and_the_update_reaches_every_parameter(tmp_path):
    cfg = load(
        ControlConfig,
        None,
        dict(TINY, algo="cg2a_ppo_provisional", total_steps=128, run_dir=str(tmp_path)),
    )
    torch.manual_seed(cfg.seed)
    from policylab.trainers.control import make_collector, make_policy

    collector = make_collector(cfg, cfg.seed)
    before = make_policy(cfg, collector.envs)[0].state_dict()
    collector.close()
    train(cfg)
    row = read_metrics(tmp_path, kind="train")[0]
    assert -1 <= row["combine/cos_min"] <= row["combine/cos_mean"] <= 1
    assert 0 <= row["combine/conflict_frac"] <= 1 and row["combine/norm_ratio"] >= 1
    after = torch.load(tmp_path / "checkpoints" / "step_1" / "state.pt", weights_only=False)
    for name, value in before.items():
        assert not torch.equal(value, after["policy"][name]), name


def test_plain_ppo_logs_no_combine_metrics_and_differs_from_augmented(tmp_path):
    plain = load(ControlConfig, None, dict(TINY, total_steps=128, run_dir=str(tmp_path / "p")))
    shifted = plain.model_copy(update={"augment": ["shift"], "run_dir": str(tmp_path / "s")})
    train(plain)
    train(shifted)
    a, b = (read_metrics(c.run_dir, kind="train")[0] for c in (plain, shifted))
    assert not any(k.startswith("combine/") for k in a) and a["loss"] != b["loss"]


def test_cg2a_resume_2_plus_2_equals_4(tmp_path):
    fields = dict(TINY, algo="cg2a_ppo_provisional", schedule="constant", eval_every=2)
    straight = load(ControlConfig, None, dict(fields, total_steps=512, run_dir=str(tmp_path / "a")))
    train(straight)
    first = load(ControlConfig, None, dict(fields, total_steps=256, run_dir=str(tmp_path / "b")))
    train(first)
    train(first.model_copy(update={"total_steps": 512}), resume=True)
    rows = assert_same_metrics(straight.run_dir, first.run_dir)
    assert len([r for r in rows if r["kind"] == "train"]) == 4


def test_policylab_train_runs_cg2a_with_the_test_backgrounds(tmp_path, capsys):
    code = main(
        ["train", "--task", "policylab/VisualReach-v0", "--algo", "cg2a_ppo_provisional",
         "total_steps=128", "num_envs=4", "num_steps=32", "minibatch_size=64", "epochs=1",
         "eval_episodes=2", "progress=false", "report_to=[]", f"run_dir={tmp_path}",
         "eval_env_kwargs={split: test}", "gradient_combine_options={kappa: 1.0}"]
    )  # fmt: skip
    assert code == 0
    assert "evaluation return" in capsys.readouterr().out
    assert (tmp_path / "checkpoints" / "latest").is_file()


def test_bad_augment_settings_fail_before_any_work(tmp_path):
    with pytest.raises(ConfigError, match="unknown augmentation 'blur'; accepted: colour_jitter"):
        load(ControlConfig, None, dict(TINY, augment=["blur"]))
    with pytest.raises(ConfigError, match="gradient_combine='pcgrad'; accepted: per_row"):
        load(ControlConfig, None, dict(TINY, augment=["shift"], gradient_combine="pcgrad"))
    with pytest.raises(ConfigError, match="acts only with augmentations"):
        load(ControlConfig, None, dict(TINY, gradient_combine="cg2a_provisional"))
    with pytest.raises(ConfigError, match="unknown \\['kapa'\\]; accepted: kappa"):
        load(
            ControlConfig, None, dict(TINY, augment=["shift"], gradient_combine_options={"kapa": 1})
        )
    with pytest.raises(ConfigError, match="has no effect with gradient_combine=per_row"):
        load(
            ControlConfig,
            None,
            dict(TINY, augment=["shift"], gradient_combine_options={"kappa": 1}),
        )
    with pytest.raises(ConfigError, match="gradient_combine_options=.*acts only with augment"):
        load(ControlConfig, None, dict(TINY, gradient_combine_options={"kappa": 0.5}))
    with pytest.raises(ConfigError, match="kappa=2; accepted"):
        load(
            ControlConfig,
            None,
            dict(TINY, algo="cg2a_ppo_provisional", gradient_combine_options={"kappa": 2}),
        )
    cfg = load(
        ControlConfig,
        None,
        dict(task="CartPole-v1", augment=["shift"], progress=False, run_dir=str(tmp_path)),
    )
    with pytest.raises(ValueError, match="needs an image observation space"):
        train(cfg)
