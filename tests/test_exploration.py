"""Exploration noise, gSDE, reward normalisation, synthetic mixing and cloning options."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from ppo_training.environment import VectorizedLateralControlEnv
from ppo_training.policy.actor_critic import ActorCritic
from ppo_training.policy.exploration import ExplorationNoise
from ppo_training.training import data_split, load_config, train, training_pool
from ppo_training.utils.normalization import ReturnNormalizer


def draws(noise: ExplorationNoise, n: int) -> np.ndarray:
    return torch.stack([noise.sample() for _ in range(n)]).numpy()  # [T, N, dim]


def test_ar1_noise_is_standard_normal_and_correlated():
    z = draws(ExplorationNoise("ar1", 0.8, 512, seed=1), 200)[..., 0]
    assert abs(z.std() - 1.0) < 0.03 and abs(z.mean()) < 0.03
    lag1 = np.corrcoef(z[1:].ravel(), z[:-1].ravel())[0, 1]
    assert abs(lag1 - 0.8) < 0.03
    iid = draws(ExplorationNoise("iid", 0.8, 512, seed=1), 200)[..., 0]
    assert abs(np.corrcoef(iid[1:].ravel(), iid[:-1].ravel())[0, 1]) < 0.03


def test_antithetic_pairs_mirror_and_hold_keeps_draws():
    z = draws(ExplorationNoise("ar1", 0.5, 6, antithetic=True, seed=2), 5)
    np.testing.assert_array_equal(z[:, 0::2], -z[:, 1::2])
    held = ExplorationNoise("iid", 0.0, 4, seed=3, dim=8, hold=3)
    z = draws(held, 7)
    assert z.shape == (7, 4, 8)
    assert np.array_equal(z[0], z[2]) and not np.array_equal(z[2], z[3]) and np.array_equal(z[3], z[5])
    whole = ExplorationNoise("iid", 0.0, 4, seed=3, dim=8, hold=-1)
    z = draws(whole, 5)
    assert all(np.array_equal(z[0], z[k]) for k in range(5))
    whole.reset()
    assert not np.array_equal(z[0], whole.sample().numpy())
    with pytest.raises(ValueError, match="even"):
        ExplorationNoise("iid", 0.0, 3, antithetic=True)
    with pytest.raises(ValueError, match="noise"):
        ExplorationNoise("pink", 0.5, 4)


def test_noise_state_round_trip():
    a = ExplorationNoise("ar1", 0.5, 4, seed=4)
    draws(a, 3)
    b = ExplorationNoise("ar1", 0.5, 4, seed=99)
    b.load_state(a.state())
    np.testing.assert_array_equal(draws(a, 4), draws(b, 4))


def test_correlated_noise_through_the_policy_keeps_its_density():
    torch.manual_seed(0)
    pol = ActorCritic(5, hidden=(16,), distribution="squashed_gaussian", init_log_std=-1.0)
    obs = torch.randn(64, 5)
    z = torch.randn(64, 1)
    raw, action, logp, _v = pol.act(obs, z)
    d = pol.dist(obs)
    torch.testing.assert_close(raw, d.loc + d.scale * z)
    torch.testing.assert_close(logp, d.log_prob(raw).sum(-1))
    assert action.abs().max() <= 1


def test_gsde_noise_is_linear_in_the_latent_features_and_density_matches():
    torch.manual_seed(0)
    pol = ActorCritic(5, hidden=(16, 8), distribution="gsde", init_log_std=-2.0)
    assert pol.log_std.shape == (8,)
    obs = torch.randn(32, 5)
    theta = torch.randn(32, 8)
    raw, _a, logp, _v = pol.act(obs, theta)
    latent = pol.actor[:-1](pol._norm(obs)).detach()
    mean = pol.actor[-1](latent)
    torch.testing.assert_close(raw, mean + (latent * pol.log_std.exp() * theta).sum(-1, keepdim=True))
    new_logp, _ent, _v = pol.evaluate(obs, raw)
    torch.testing.assert_close(new_logp, logp)
    # same exploration matrix, same state -> same action: the noise is a function of the state
    raw2, *_ = pol.act(obs, theta)
    torch.testing.assert_close(raw, raw2)
    with pytest.raises(ValueError, match="exploration noise"):
        pol.act(obs)


def test_return_normaliser_scales_by_the_return_spread():
    norm = ReturnNormalizer(8, gamma=0.9)
    gen = torch.Generator().manual_seed(0)
    for t in range(400):
        r = -torch.rand(8, generator=gen, dtype=torch.float64) * 10.0
        scaled = norm(r, torch.full((8,), float(t % 100 == 99)))
    # a constant-reward return of 0.9-discounting sums to about 10x the reward: std scales likewise
    assert 5.0 < norm.std < 40.0
    assert torch.all(scaled <= 0) and scaled.dtype == torch.float32
    state = norm.state_dict()
    other = ReturnNormalizer(8, gamma=0.9)
    other.load_state_dict(state)
    assert other.std == norm.std


def test_synthetic_segments_are_mixed_in_at_the_configured_ratio(in_train_dir, tmp_path):
    from ppo_training.data.synth import write_dataset

    write_dataset(tmp_path / "synth", 20, seed=0, progress=False)
    cfg = load_config(None, {"data.path": "data", "data.val_fraction": 0.0, "data.synthetic_path": str(tmp_path / "synth"),
                             "data.synthetic_ratio": 0.25})
    split = data_split(cfg)
    assert len(split["synthetic"]) == 20 and len(split["train"]) == 4
    files, weights = training_pool(cfg, split)
    assert len(files) == 24 and abs(sum(weights[4:]) - 0.25) < 1e-12
    env = VectorizedLateralControlEnv(files, 8, weights=weights)
    env.reset(seed=0)
    drawn = []
    for _ in range(40):
        drawn += list(env._start()[1]["segment"])  # a new set of episodes, as after each episode end
    share = np.mean(["synth" in p for p in drawn])
    assert abs(share - 0.25) < 0.07, share
    cfg_missing = load_config(None, {"data.path": "data", "data.synthetic_path": str(tmp_path / "none"),
                                     "data.synthetic_ratio": 0.5})
    with pytest.raises(FileNotFoundError, match="ppo_training.data.synth"):
        data_split(cfg_missing)
    with pytest.raises(ValueError, match="probabilities"):
        VectorizedLateralControlEnv(files, 2, weights=[1.0] * len(files))


def test_training_options_run_and_clone_the_spread(in_train_dir, model_path):
    """Delta actions with AR(1) antithetic noise, return normalisation, Huber loss and a learned
    cloning spread: a tiny run completes and the cloning fits the spread (it moves off its start)."""
    cfg = load_config(None, {
        "data.path": "data", "data.val_fraction": 0.0, "data.val_segments": 1, "env.n_envs": 4,
        "env.action_mode": "delta", "train.total_timesteps": 1600, "train.eval_every": 1, "bc.episodes": 1,
        "bc.epochs": 5, "bc.batch_size": 200, "bc.learning_rate": 0.01, "bc.learn_std": True, "bc.min_log_std": -3.5, "policy.init_log_std": -1.0,
        "ppo.exploration": "ar1", "ppo.antithetic": True, "ppo.reward_norm": True, "ppo.value_loss": "huber",
        "logging.progress": False, "logging.tensorboard": False, "device": "cpu",
        "runs_dir": str(in_train_dir / "runs"), "run_name": "opts", "tinyphysics_model": str(model_path),
        "train.reference_costs": False,
    })
    r = train(cfg)
    assert r.global_step == 1600 and np.isfinite(r.best_val_cost)
    assert -3.5 <= r.stats["bc/log_std"][0] < -1.0
    gsde = train({**cfg, "run_name": "gsde", "policy": {**cfg["policy"], "distribution": "gsde"},
                  "bc": {**cfg["bc"], "learn_std": False}})
    assert gsde.global_step == 1600 and np.isfinite(gsde.best_val_cost)


def test_advantages_scaled_per_env_give_each_segment_an_equal_say():
    from ppo_training.utils.replay_buffer import RolloutBuffer

    buf = RolloutBuffer(50, 4, 3)
    gen = torch.Generator().manual_seed(0)
    scales = torch.tensor([0.1, 1.0, 10.0, 100.0])
    buf.advantages = torch.randn((50, 4), generator=gen) * scales
    before = buf.advantages.clone()
    buf.scale_advantages_per_env()
    torch.testing.assert_close(buf.advantages.std(dim=0), torch.ones(4))
    # each column only rescaled: signs and order within an env are kept
    assert torch.equal(torch.sign(buf.advantages), torch.sign(before))


def test_policy_averaging_is_what_validation_and_evaluation_see(in_train_dir, model_path):
    from ppo_training.controllers.policy import PolicyController
    from ppo_training.evaluation import evaluate
    from ppo_training.sim.backends import make_backend
    from ppo_training.utils.checkpoint import load_checkpoint

    cfg = load_config(None, {
        "data.path": "data", "data.val_fraction": 0.0, "data.val_segments": 1, "env.n_envs": 4,
        "train.total_timesteps": 4800, "train.eval_every": 3, "train.policy_ema": 0.5, "bc.episodes": 1,
        "bc.epochs": 1, "logging.progress": False, "logging.tensorboard": False, "device": "cpu",
        "runs_dir": str(in_train_dir / "runs"), "run_name": "ema", "tinyphysics_model": str(model_path),
        "train.reference_costs": False, "train.copy_final_model": False,
    })
    r = train(cfg)
    ck = load_checkpoint(r.final_model)
    online, averaged = ck["policy"], ck["eval_policy"]
    moved = [k for k in online if k.startswith("actor") and not torch.equal(online[k], averaged[k])]
    assert moved, "the averaged actor equals the online one"
    ctrl = PolicyController.from_checkpoint(r.final_model)
    cost = evaluate(ctrl, ck["files"]["val"], backend=make_backend("onnx", model_path), progress=False).table
    # the run's last validation evaluated exactly the weights that evaluation loads
    assert float(cost["total_cost"].mean()) == r.stats["validation/cost_mean"][-1]
