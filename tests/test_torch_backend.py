"""The torch simulator backend (run on CPU here): logits, tokenizer, costs, training on it."""
from __future__ import annotations

import numpy as np
import pytest
import torch

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


def test_gpu_benchmark_script_runs_on_cpu(tmp_path):
    """The GPU benchmark is one command; its quick mode exercises every section on the CPU."""
    import json
    import subprocess
    import sys

    from ppo_training import PROJECT_ROOT

    out = tmp_path / "bench.json"
    r = subprocess.run([sys.executable, "bench/gpu_throughput.py", "--device", "cpu", "--quick", "--precisions",
                        "fp32", "--skip-quality", "--out", str(out)], cwd=PROJECT_ROOT, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    raw = json.loads(out.read_text())
    assert raw["fp32_vs_onnx"]["segments"] == 8 and raw["ppo"]["transitions_per_s"]
    assert "GPU benchmark on CPU" in r.stdout
