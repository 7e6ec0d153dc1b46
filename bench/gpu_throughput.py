#!/usr/bin/env python
"""Single-GPU benchmarks of the torch simulator backend and of PPO kept on the device.

    python bench/gpu_throughput.py --device cuda [--out runs/gpu_bench.json] [--train-minutes 15]
    python bench/gpu_throughput.py --device cpu --quick       # smoke run of every section

Sections (one table at the end, the card named, raw numbers in the JSON):

1. simulator alone: env-steps/s of the batched engine with the PID controller at batch 1k, 8k,
   32k, 128k for each precision mode (fp32, tf32, bf16), timed over model-calling steps;
   each mode's logit error against fp32 and its mean-cost change on 1,000 segments;
2. fp32 torch vs the exact onnxruntime CPU backend: max and mean |total_cost difference|;
3. evaluation of 5,000 segments (the real data set's first 5,000 when present, else synthetic):
   wall time, cost-only rollouts, PID;
4. PPO end to end with the simulator, features, policy and buffer on the device: transitions/s
   including updates;
5. quality: the GPU config (config.gpu.yaml) trained on synthetic segments for
   ``--train-minutes``, then PPO / PID mean total_cost on the eight real segments.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ppo_training.constants import CONTROL_START_IDX  # noqa: E402
from ppo_training.controllers import PIDController  # noqa: E402
from ppo_training.data.segments import load_segments  # noqa: E402
from ppo_training.data.synth import synthetic_segments  # noqa: E402
from ppo_training.sim.backends import PRECISIONS, OnnxBackend, TorchBackend  # noqa: E402
from ppo_training.sim.engine import BatchedSimulator  # noqa: E402


def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def tiled(pool: list, n: int) -> list:
    """``n`` segments cycling through ``pool`` with distinct path strings (distinct noise)."""
    return [dataclasses.replace(pool[k % len(pool)], path=f"bench/tile_{k:07d}.csv") for k in range(n)]


def sim_throughput(backend, segments: list, steps: int, device: str) -> float:
    """env-steps/s over ``steps`` model-calling steps (after the warm-up, which makes no calls)."""
    sim = BatchedSimulator(backend, segments)
    ctrl = PIDController()
    ctrl.reset(len(segments))
    inputs = sim.reset()
    while inputs.step < CONTROL_START_IDX + 2:  # warm-up, plus two model calls for lazy init
        inputs = sim.step(ctrl(inputs))
    sync(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        inputs = sim.step(ctrl(inputs))
    sync(device)
    return len(segments) * steps / (time.perf_counter() - t0)


def logit_error(backend, ref_backend, n: int, device: str) -> float:
    import torch

    rng = np.random.default_rng(0)
    states = np.concatenate([rng.uniform(-2, 2, (n, 20, 1)), rng.normal(0, 1, (n, 20, 1)),
                             rng.uniform(0, 35, (n, 20, 1)), rng.normal(0, 1, (n, 20, 1))], -1).astype(np.float32)
    tokens = rng.integers(0, 1024, (n, 20))
    s, t = torch.as_tensor(states, device=device), torch.as_tensor(tokens, device=device)
    ref = ref_backend.logits(s, t).float()
    got = backend.logits(s, t).float()
    return float((got - ref).abs().max() / ref.abs().max())


def main(argv=None) -> int:
    import torch

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--quick", action="store_true", help="tiny sizes: checks that every section runs")
    p.add_argument("--compile", action="store_true", help="also time torch.compile (CUDA graphs)")
    p.add_argument("--train-minutes", type=float, default=15.0)
    p.add_argument("--skip-quality", action="store_true")
    p.add_argument("--precisions", default=",".join(PRECISIONS), help="comma-separated subset of fp32,tf32,bf16")
    p.add_argument("--out", default=str(ROOT / "runs" / "gpu_bench.json"))
    args = p.parse_args(argv)
    dev = args.device
    card = torch.cuda.get_device_name(0) if dev.startswith("cuda") else f"CPU ({platform.processor() or platform.machine()})"
    batches = [16, 64] if args.quick else [1024, 8192, 32768, 131072]
    steps = 5 if args.quick else 50
    n_cost = 8 if args.quick else 1000
    raw: dict = {"device": dev, "card": card, "torch": torch.__version__, "batches": batches}
    rows: list[tuple[str, str, str]] = []
    print(f"device: {card}; torch {torch.__version__}", flush=True)

    pool = synthetic_segments(16 if args.quick else 4096, seed=123)
    fp32 = TorchBackend(device=dev, precision="fp32")
    # 1. simulator alone, per precision
    cost_segments = tiled(pool, n_cost)
    ref_costs = BatchedSimulator(fp32, cost_segments).rollout(PIDController()).costs["total_cost"]
    precisions = [x for x in args.precisions.split(",") if x]
    modes = [(prec, False) for prec in precisions] + ([("bf16", True), ("fp32", True)] if args.compile else [])
    for prec, comp in modes:
        be = fp32 if (prec == "fp32" and not comp) else TorchBackend(device=dev, precision=prec, compile=comp)
        label = prec + (" +compile" if comp else "")
        err = logit_error(be, fp32, 256, dev)
        costs = BatchedSimulator(be, cost_segments).rollout(PIDController()).costs["total_cost"]
        d_cost = float(costs.mean() - ref_costs.mean())
        raw.setdefault("simulator", {})[label] = {"logit_rel_err_vs_fp32": err, "mean_cost_change": d_cost}
        for b in batches:
            try:
                sps = sim_throughput(be, tiled(pool, b), steps, dev)
            except torch.OutOfMemoryError:
                sps = float("nan")
            raw["simulator"][label][str(b)] = sps
            rows.append((f"simulator {label}", f"batch {b}", f"{sps / 1e6:.3f} M env-steps/s"))
            print(rows[-1], flush=True)
        rows.append((f"simulator {label}", "logits vs fp32", f"rel err {err:.2e}; mean cost {d_cost:+.4f}"))
        if dev.startswith("cuda"):
            torch.cuda.empty_cache()

    # 2. fp32 torch vs exact onnxruntime CPU
    onnx_costs = BatchedSimulator(OnnxBackend(), cost_segments).rollout(
        PIDController()).costs["total_cost"]
    diff = np.abs(onnx_costs - ref_costs[: len(onnx_costs)])
    raw["fp32_vs_onnx"] = {"segments": len(diff), "max_abs": float(diff.max()), "mean_abs": float(diff.mean()),
                           "exact_share": float((diff == 0).mean())}
    rows.append(("torch fp32 vs onnxruntime", f"{len(diff)} segments",
                 f"max |d cost| {diff.max():.4f}, mean {diff.mean():.5f}, identical {100 * (diff == 0).mean():.1f}%"))

    # 3. evaluation of 5,000 segments
    real = ROOT / "data"
    n_eval = 16 if args.quick else 5000
    files = sorted(real.glob("*.csv"))
    if len(files) >= n_eval:
        segs, what = load_segments([f"data/{f.name}" for f in files[:n_eval]]), "real"
    else:
        segs, what = tiled(pool, n_eval), "synthetic"
    for prec in [x for x in ("fp32", "bf16") if x in precisions]:
        be = fp32 if prec == "fp32" else TorchBackend(device=dev, precision=prec)
        BatchedSimulator(be, segs[:8]).rollout(PIDController())  # warm up kernels
        sync(dev)
        t0 = time.perf_counter()
        res = BatchedSimulator(be, segs).rollout(PIDController())
        sync(dev)
        wall = time.perf_counter() - t0
        raw.setdefault("eval", {})[prec] = {"segments": n_eval, "data": what, "wall_s": wall,
                                            "mean_total_cost": float(res.costs["total_cost"].mean())}
        rows.append((f"eval {n_eval} {what} segments", prec, f"{wall:.2f} s (PID mean {res.costs['total_cost'].mean():.2f})"))
        print(rows[-1], flush=True)

    # 4. PPO end to end on the device, 5. quality
    from ppo_training.training import load_config, train

    tmp = Path(tempfile.mkdtemp(prefix="gpu_bench_"))
    try:
        data = tmp / "synthetic"
        from ppo_training.data.synth import write_dataset

        write_dataset(data, 64 if args.quick else 2000, seed=0, progress=False)
        gpu_cfg = ROOT / "config.gpu.yaml"
        over = {"data.path": str(data), "device": dev, "runs_dir": str(tmp / "runs"), "logging.progress": False}
        if args.quick:
            over.update({"env.n_envs": 8, "bc.episodes": 1, "bc.epochs": 1, "data.val_segments": 4,
                         "env.compile": False, "train.num_steps": 400})
        cfg = load_config(gpu_cfg, {**over, "run_name": "throughput", "train.eval_every": 1000,
                                    "train.total_timesteps": 3 * 400 * load_config(gpu_cfg, over)["env"]["n_envs"]})
        cfg["bc"]["enabled"] = False
        t0 = time.perf_counter()
        r = train(cfg)
        sps = r.stats["charts/env_steps_per_second"]
        raw["ppo"] = {"n_envs": cfg["env"]["n_envs"], "transitions_per_s": sps, "wall_s": time.perf_counter() - t0}
        rows.append(("PPO end to end", f"{cfg['env']['n_envs']} envs", f"{np.median(sps) / 1e6:.3f} M transitions/s"))
        print(rows[-1], flush=True)
        if not args.skip_quality:
            minutes = 0.2 if args.quick else args.train_minutes
            cfg = load_config(gpu_cfg, {**over, "run_name": "quality", "train.time_budget_s": minutes * 60})
            r = train(cfg)
            sys.path.insert(0, str(ROOT / "bench"))
            from train_quality import real_dir_default, score_checkpoint

            q = score_checkpoint(r.best_model or r.final_model, real_dir_default())
            raw["quality"] = {"train_minutes": minutes, "global_step": r.global_step, **q}
            if q:
                rows.append(("quality (real segments)", f"{minutes:g} min training",
                             f"PPO/PID {q['ppo_over_pid']:.3f}, PPO/teacher {q['ppo_over_teacher']:.3f}"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"\nGPU benchmark on {card} (torch {torch.__version__})")
    w = max(len(r[0]) for r in rows) + 2
    for a, b, c in rows:
        print(f"{a:<{w}}{b:<22}{c}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(raw, indent=2))
    print(f"raw numbers: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
