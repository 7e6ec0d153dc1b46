"""The torch simulator backend (run on CPU here): logits, tokenizer, costs, training on it."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from ppo_training import PROJECT_ROOT
from ppo_training.controllers import PIDController
from ppo_training.data import list_segment_files, load_segments
from ppo_training.evaluation import evaluate
from ppo_training.sim import BatchedSimulator, encode
from ppo_training.sim.backends import OnnxBackend, TorchBackend
from ppo_training.training import load_config, train


def _inputs(n=64, seed=0):
    rng = np.random.default_rng(seed)
    states = np.concatenate([rng.uniform(-2, 2, (n, 20, 1)), rng.normal(0, 1, (n, 20, 1)),
                             rng.uniform(0, 35, (n, 20, 1)), rng.normal(0, 1, (n, 20, 1))], -1).astype(np.float32)
    return states, rng.integers(0, 1024, (n, 20)).astype(np.int64)


@pytest.fixture(scope="module")
def torch_fp32(model_path):
    return TorchBackend(model_path, device="cpu")


def test_fp32_logits_match_onnxruntime(model_path, torch_fp32):
    states, tokens = _inputs()
    ref = OnnxBackend(model_path, threads=1).logits(states, tokens)[:, -1]
    got = torch_fp32.logits(torch.from_numpy(states), torch.from_numpy(tokens)).numpy()
    rel = np.abs(got - ref).max() / np.abs(ref).max()
    assert rel <= 1e-5, rel


@pytest.mark.parametrize("precision,bound", [("tf32", 1e-5), ("bf16", 5e-2)])
def test_precision_modes_run_with_bounded_error(model_path, torch_fp32, precision, bound):
    states, tokens = _inputs(16, seed=1)
    ref = torch_fp32.logits(torch.from_numpy(states), torch.from_numpy(tokens)).numpy()
    be = TorchBackend(model_path, device="cpu", precision=precision)
    got = be.logits(torch.from_numpy(states), torch.from_numpy(tokens)).numpy()
    assert got.dtype == np.float32 and np.isfinite(got).all()
    assert np.abs(got - ref).max() / np.abs(ref).max() <= bound


def test_tokenizer_ops_match_numpy(torch_fp32):
    x = np.concatenate([np.linspace(-6, 6, 2001), np.linspace(-5, 5, 1024), np.nextafter(np.linspace(-5, 5, 1024), 9)])
    assert np.array_equal(torch_fp32.encode(torch.from_numpy(x)).numpy(), encode(x))
    k = torch.arange(1024)
    assert torch_fp32.decode(k).dtype == torch.float64


def test_costs_match_onnx_backend(in_data_dir, model_path, torch_fp32):
    files = list_segment_files("data")
    onnx = evaluate(PIDController(), files, backend=OnnxBackend(model_path), progress=False).table["total_cost"]
    tch = evaluate(PIDController(), files, backend=torch_fp32, progress=False).table["total_cost"]
    diff = np.abs(onnx.to_numpy() - tch.to_numpy())
    # fp32 rounding can move a token only where a uniform sits at a bin boundary: rare
    assert (diff == 0).sum() >= 6, diff
    assert (diff / onnx.to_numpy()).max() < 0.05, diff


def test_engine_state_stays_on_the_backend(in_data_dir, torch_fp32):
    sim = BatchedSimulator(torch_fp32, load_segments(list_segment_files("data", 2)))
    inputs = sim.reset()
    assert isinstance(inputs.target, torch.Tensor) and isinstance(sim.current_history, torch.Tensor)
    res = sim.rollout(PIDController())
    assert np.isfinite(res.costs["total_cost"]).all()


def test_training_on_the_torch_backend_matches_onnx(in_train_dir, model_path):
    in_data_dir = in_train_dir
    cfg = load_config(None, {
        "data.path": "data", "data.val_fraction": 0.0, "data.test_fraction": 0.0,
        "data.val_segments": 2, "env.n_envs": 2, "train.total_timesteps": 1600, "train.eval_every": 1,
        "bc.episodes": 1, "bc.epochs": 2, "logging.progress": False, "logging.tensorboard": False,
        "device": "cpu", "runs_dir": str(in_data_dir / "runs"), "tinyphysics_model": str(model_path),
    })
    a = train({**cfg, "run_name": "onnx"})
    cfg_t = {**cfg, "run_name": "torch", "env": {**cfg["env"], "backend": "torch"}}
    b = train(cfg_t)
    np.testing.assert_allclose(b.stats["episode/cost_mean"], a.stats["episode/cost_mean"], rtol=1e-2)
    np.testing.assert_allclose(b.stats["validation/cost_mean"], a.stats["validation/cost_mean"], rtol=1e-2)


def test_compile_falls_back_to_eager(model_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("no compiler here")

    monkeypatch.setattr(torch, "compile", broken)
    with pytest.warns(UserWarning, match="runs eagerly"):
        be = TorchBackend(model_path, device="cpu", compile=True)
    states, tokens = _inputs(2)
    assert be.logits(torch.from_numpy(states), torch.from_numpy(tokens)).shape == (2, 1024)


def test_compiled_model_is_captured_once_per_batch_size(in_data_dir, model_path):
    """A rollout reuses one graph per batch size: no recompilation per step (CUDA graphs need that)."""
    from torch._dynamo.utils import counters

    counters.clear()
    be = TorchBackend(model_path, device="cpu", compile=True, compile_options={"backend": "eager"})
    segs = load_segments(list_segment_files("data", 2))
    costs = BatchedSimulator(be, segs).rollout(PIDController()).costs["total_cost"]
    assert be.compiled and be.compile_error is None
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])
    eager = BatchedSimulator(TorchBackend(model_path, device="cpu"), segs).rollout(PIDController())
    np.testing.assert_array_equal(costs, eager.costs["total_cost"])


def _count_host_transfers(fn) -> dict:
    from torch.utils._python_dispatch import TorchDispatchMode

    counts = {"reads": 0, "host_arrays": 0}

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = str(func)
            counts["reads"] += "_local_scalar_dense" in name  # .item(), bool(tensor): a GPU sync
            counts["host_arrays"] += "lift_fresh" in name  # torch.as_tensor(numpy): a synchronous copy
            return func(*args, **(kwargs or {}))

    with Mode():
        fn()
    return counts


def test_env_steps_on_the_torch_backend_never_read_back_or_copy_from_the_host(in_data_dir, model_path):
    """A training step (policy + simulator + features + reward) stays on the device: on a GPU any read
    of a device value or copy of a host array there is a synchronisation that stalls every step."""
    from ppo_training.environment.lateral_env import VectorizedLateralControlEnv
    from ppo_training.training import build_policy, env_config_of, load_config

    cfg = load_config(PROJECT_ROOT / "config.gpu.yaml")  # the GPU config's observation (with the model prediction)
    env = VectorizedLateralControlEnv(list_segment_files("data"), 4, backend=TorchBackend(model_path, device="cpu"),
                                      config=env_config_of(cfg), paired=True)
    policy = build_policy(cfg)
    obs, _ = env.reset(seed=0)
    state = {"obs": obs}

    def step():
        with torch.no_grad():
            raw, action, logp, value = policy.act(state["obs"])
        state["obs"], reward, term, trunc, info = env.step(action)
        assert isinstance(reward, torch.Tensor) and isinstance(state["obs"], torch.Tensor)

    step()
    assert _count_host_transfers(lambda: [step() for _ in range(3)]) == {"reads": 0, "host_arrays": 0}


def test_uniform_draws_are_the_official_stream():
    from ppo_training.sim.engine import uniform_draws

    for seed in (0, 17, 9999):
        np.testing.assert_array_equal(uniform_draws(seed, 580), np.random.RandomState(seed).random_sample(580))
    assert not uniform_draws(17, 580).flags.writeable


def test_rows_sharing_segment_data_equal_rows_with_their_own_copies(in_data_dir, model_path):
    """The engine lays out repeated segments once and gathers them: same rollout as separate copies."""
    import dataclasses

    a, b = load_segments(list_segment_files("data", 2))
    shared = [a, dataclasses.replace(a, path="x/tile_1.csv"), b, a]
    copies = [dataclasses.replace(s, **{f: getattr(s, f).copy() for f in ("roll_lataccel", "v_ego", "a_ego",
                                                                       "target_lataccel", "steer_command")})
              for s in shared]
    for backend in (OnnxBackend(model_path), TorchBackend(model_path, device="cpu")):
        x = BatchedSimulator(backend, shared, full=True).rollout(PIDController(), keep_histories=True)
        y = BatchedSimulator(backend, copies, full=True).rollout(PIDController(), keep_histories=True)
        for k in x.costs:
            np.testing.assert_array_equal(x.costs[k], y.costs[k])
        for h in ("target", "current", "action"):
            for u, v in zip(getattr(x, h), getattr(y, h)):
                np.testing.assert_array_equal(u, v)
    assert x.costs["total_cost"][0] != x.costs["total_cost"][1]  # another path string: other noise


def test_minibatch_order_on_the_cpu_is_the_generators_permutation():
    from ppo_training.policy.ppo_agent import minibatch_order

    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    assert torch.equal(minibatch_order(1000, g1, "cpu"), torch.randperm(1000, generator=g2))
