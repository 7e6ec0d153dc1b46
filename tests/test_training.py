"""Training run at tiny scale: determinism, resume, checkpoints, TensorBoard, PPO pieces."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from ppo_training.policy.actor_critic import ActorCritic
from ppo_training.training import load_config, train
from ppo_training.utils.checkpoint import CheckpointError, load_checkpoint, save_atomic
from ppo_training.utils.replay_buffer import RolloutBuffer


@pytest.fixture()
def tiny_cfg(in_train_dir, model_path):
    """Two envs, whole-episode rollouts, three updates; data are the segments in ./data."""
    return load_config(None, {
        "data.path": "data", "data.val_fraction": 0.0, "data.test_fraction": 0.0,
        "data.val_segments": 2, "env.n_envs": 2, "train.total_timesteps": 2400, "train.eval_every": 1,
        "train.checkpoint_every": 1, "train.patience": None, "bc.episodes": 1, "bc.epochs": 2,
        "logging.progress": False, "device": "cpu", "runs_dir": str(in_train_dir / "runs"),
        "tinyphysics_model": str(model_path),
    })


def _curve(result) -> np.ndarray:
    return np.array(result.stats["losses/policy_loss"] + result.stats["episode/cost_mean"]
                    + result.stats["validation/cost_mean"])


def test_same_seed_same_curve_and_artifacts(tiny_cfg):
    a = train({**tiny_cfg, "run_name": "a"})
    b = train({**tiny_cfg, "run_name": "b"})
    assert len(a.stats["losses/policy_loss"]) == 3
    assert np.array_equal(_curve(a), _curve(b))
    ckpts = a.run_dir / "checkpoints"
    for name in ("best.pt", "final_model.pt", "training_stats.npz", "checkpoint_800.pt", "checkpoint_2400.pt"):
        assert (ckpts / name).is_file(), name
    ck = load_checkpoint(ckpts / "final_model.pt")
    assert ck["global_step"] == 2400 and ck["files"]["train"] and "optimizer" in ck
    stats = np.load(ckpts / "training_stats.npz")
    assert "validation__cost_mean" in stats.files
    # TensorBoard scalars, read back with TensorBoard's own reader
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(a.run_dir))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    for tag in ("losses/policy_loss", "losses/approx_kl", "losses/clip_frac", "losses/entropy",
                "losses/explained_variance", "episode/cost_mean", "episode/cost_median", "episode/cost_p90",
                "validation/cost_mean", "charts/env_steps_per_second"):
        assert tag in tags, tag
    # the starting (cloned) policy is validated too: the curve's first point
    assert [e.step for e in acc.Scalars("validation/cost_mean")] == [0, 800, 1600, 2400]
    # the teacher's and PID's validation costs: reference lines, equal to a direct evaluation
    assert a.references.keys() == {"teacher", "pid"}
    for name in ("teacher", "pid"):
        assert {round(e.value, 4) for e in acc.Scalars(f"validation/{name}_cost")} == {round(a.references[name], 4)}


def test_resume_continues_the_same_curve(tiny_cfg, capsys, monkeypatch):
    full = train({**tiny_cfg, "run_name": "full"})
    calls = {"n": 0}

    def stop_after_two():
        calls["n"] += 1
        return calls["n"] > 2

    # With progress on and stderr not a terminal (as in a log), progress comes as plain lines.
    monkeypatch.delenv("PPO_PROGRESS", raising=False)
    monkeypatch.setenv("PPO_PROGRESS_INTERVAL", "0.001")
    logged = {**tiny_cfg, "run_name": "cut", "logging": {**tiny_cfg["logging"], "progress": True}}
    capsys.readouterr()
    cut = train(logged, should_stop=stop_after_two)
    assert cut.stopped_because == "stopped by user" and cut.global_step == 1600
    first = capsys.readouterr()
    assert "resuming" not in first.out
    assert "\r" not in first.err and first.err.count("train cut: ") == 2
    resumed = train(logged, resume="auto")
    assert resumed.global_step == 2400
    assert np.array_equal(_curve(full), _curve(resumed))
    out = capsys.readouterr()
    ckpt = resumed.run_dir / "checkpoints" / "checkpoint_1600.pt"
    assert f"resuming {ckpt} at step 1600 (update 2)" in out.out
    assert "\r" not in out.err and "train cut: 2.40k/2.40k step (100%)" in out.err


def test_resume_rejects_bad_checkpoint(tiny_cfg, tmp_path):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="bad.pt"):
        train({**tiny_cfg, "run_name": "x"}, resume=str(bad))
    other = tmp_path / "other.pt"
    save_atomic({"weights": 1}, other)
    with pytest.raises(CheckpointError, match="not a policy checkpoint"):
        load_checkpoint(other)


def test_config_overrides_are_checked(tmp_path):
    with pytest.raises(KeyError, match="nope"):
        load_config(None, {"env.nope": 1})
    with pytest.raises(FileNotFoundError):
        load_config(tmp_path / "missing.yaml")


def test_gae_matches_hand_computation():
    buf = RolloutBuffer(3, 1, 2)
    rewards, values, dones = [1.0, 2.0, 3.0], [0.5, 0.4, 0.3], [0.0, 1.0, 0.0]
    for t in range(3):
        buf.add(torch.zeros(1, 2), torch.zeros(1, 1), torch.zeros(1), torch.tensor([rewards[t]]),
                torch.tensor([dones[t]]), torch.tensor([values[t]]))
    buf.compute_returns(torch.tensor([0.2]), gamma=0.9, gae_lambda=0.8)
    d2 = 3.0 + 0.9 * 0.2 - 0.3
    d1 = 2.0 - 0.4  # episode ended after step 1: no bootstrap
    d0 = 1.0 + 0.9 * 0.4 - 0.5
    want = [d0 + 0.9 * 0.8 * d1, d1, d2]
    assert torch.allclose(buf.advantages[:, 0], torch.tensor(want))
    assert torch.allclose(buf.returns[:, 0], torch.tensor(want) + torch.tensor(values))


@pytest.mark.parametrize("dist", ["beta", "squashed_gaussian"])
def test_actor_critic_shapes_and_bounds(dist):
    torch.manual_seed(0)
    pol = ActorCritic(27, hidden=(16,), distribution=dist)
    obs = torch.randn(5, 27)
    raw, action, logp, value = pol.act(obs)
    assert raw.shape == action.shape == (5, 1) and logp.shape == value.shape == (5,)
    assert action.abs().max() <= 1
    lp2, ent, v2 = pol.evaluate(obs, raw)
    assert torch.allclose(lp2, logp) and torch.allclose(v2, value) and ent.shape == (5,)
    det = pol.deterministic(obs)
    assert det.abs().max() <= 1
    back = pol.to_action(pol.from_action(torch.tensor([[0.3]])))
    assert torch.allclose(back, torch.tensor([[0.3]]), atol=1e-5)


def test_paired_advantages_cancel_shared_rewards():
    buf = RolloutBuffer(3, 4, 2)
    rewards = torch.tensor([[1.0, 2.0, 3.0, 3.0]] * 3)
    for t in range(3):
        buf.add(torch.zeros(4, 2), torch.zeros(4, 1), torch.zeros(4), rewards[t],
                torch.full((4,), float(t == 2)), torch.zeros(4))
    buf.compute_paired_advantages(gamma=0.5)
    g0 = torch.tensor([1.75, 1.5, 1.0])
    assert torch.allclose(buf.returns[:, 0], g0) and torch.allclose(buf.returns[:, 1], 2 * g0)
    assert torch.allclose(buf.advantages[:, 0], -g0) and torch.allclose(buf.advantages[:, 1], g0)
    assert torch.all(buf.advantages[:, 2:] == 0)  # equal rewards in a pair: no preference
