#!/usr/bin/env python
"""Train with the default config on synthetic segments within a time budget, then score PID, the
behaviour-cloning teacher and the PPO policy on the eight real segments (never trained on).

    python bench/train_quality.py --budget-min 20 [--run-name quality] [--save-reference]

Prints mean costs, PPO / PID and PPO / teacher ratios, training wall time and peak memory, and
writes them to runs/<name>/quality.json.  ``--save-reference`` copies the evaluated policy to
models/reference/ppo_reference.pt (this is how the committed reference policy is made).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ppo_training import PROJECT_ROOT  # noqa: E402
from ppo_training.controllers import PIDController  # noqa: E402
from ppo_training.controllers.policy import PolicyController, TeacherController  # noqa: E402
from ppo_training.data.segments import is_synthetic_dir  # noqa: E402
from ppo_training.evaluation import evaluate  # noqa: E402
from ppo_training.sim.backends import make_backend  # noqa: E402
from ppo_training.training import build_policy, env_config_of, load_config, train  # noqa: E402
from ppo_training.utils.checkpoint import load_checkpoint  # noqa: E402


def real_dir_default() -> Path:
    shared = PROJECT_ROOT.parent / "shared" / "tinyphysics" / "data"
    return shared if shared.is_dir() else PROJECT_ROOT / "data"


def peak_rss_mb() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, kids) / 1024.0


def score_checkpoint(ckpt_path: str | Path, real: Path, model_path: str | None = None) -> dict:
    """PID, the teacher and the checkpoint's policy on the eight real segments, as ``data/0000k.csv``.

    Returns mean costs per controller (``rows``), PPO / PID and PPO / teacher ratios and peak memory.
    """
    ckpt = load_checkpoint(ckpt_path)
    policy = build_policy(ckpt["config"])
    policy.load_state_dict(ckpt["policy"])
    real_files = sorted(Path(real).glob("0000[0-7].csv"))
    if len(real_files) != 8:
        raise FileNotFoundError(f"expected the eight real segments 00000.csv..00007.csv in {real}")
    backend = make_backend("onnx", model_path)
    with tempfile.TemporaryDirectory() as tmp:  # evaluate as data/0000k.csv: the official seeds
        (Path(tmp) / "data").mkdir()
        for f in real_files:
            shutil.copy(f, Path(tmp) / "data" / f.name)
        cwd = os.getcwd()
        os.chdir(tmp)
        try:
            files = [f"data/{f.name}" for f in real_files]
            rows = {}
            for name, ctrl in (("pid", PIDController()), ("teacher (pid_ff)", TeacherController()),
                               ("ppo", PolicyController(policy, env_config_of(ckpt["config"])))):
                rows[name] = evaluate(ctrl, files, backend=backend, progress=False).summary()
        finally:
            os.chdir(cwd)
    pid = rows["pid"]["total_cost"]
    return {"rows": rows, "ppo_over_pid": rows["ppo"]["total_cost"] / pid,
            "ppo_over_teacher": rows["ppo"]["total_cost"] / rows["teacher (pid_ff)"]["total_cost"],
            "peak_rss_mb": peak_rss_mb(), "checkpoint": str(ckpt_path), "global_step": ckpt["global_step"]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=None)
    p.add_argument("--budget-min", type=float, default=20.0, help="training wall-time budget (max 30)")
    p.add_argument("--run-name", default="quality")
    p.add_argument("--real-dir", default=None, help="folder with the real segments 00000.csv ...")
    p.add_argument("--checkpoint", default=None, help="skip training; evaluate this checkpoint")
    p.add_argument("--save-reference", action="store_true")
    args = p.parse_args(argv)

    cfg = load_config(args.config, {"run_name": args.run_name, "train.time_budget_s": args.budget_min * 60})
    data_path = PROJECT_ROOT / cfg["data"]["path"] if not Path(cfg["data"]["path"]).is_absolute() else Path(cfg["data"]["path"])
    if not is_synthetic_dir(data_path):
        print(f"error: {data_path} is not a synthetic data folder; generate it with "
              f"python -m ppo_training.data.synth --n 2000 --out data/synthetic --seed 0", file=sys.stderr)
        return 1
    cfg["data"]["path"] = str(data_path)
    cfg["runs_dir"] = str(PROJECT_ROOT / cfg["runs_dir"])

    t0 = time.time()
    if args.checkpoint:
        ckpt_path = Path(args.checkpoint)
        train_wall = float("nan")
    else:
        result = train(cfg)
        train_wall = time.time() - t0
        ckpt_path = result.best_model or result.final_model
        print(f"training stopped: {result.stopped_because} after {result.global_step} steps, "
              f"{train_wall / 60:.1f} min; best validation cost {result.best_val_cost:.2f}")
    out = score_checkpoint(ckpt_path, Path(args.real_dir) if args.real_dir else real_dir_default(),
                           cfg["tinyphysics_model"])
    out["train_wall_s"] = train_wall
    rows, ckpt = out["rows"], load_checkpoint(ckpt_path)
    pid = rows["pid"]["total_cost"]
    print(f"\nReal segments: 8 (data/00000.csv .. 00007.csv); policy: {ckpt_path}")
    print(f"{'controller':<18}{'lataccel':>10}{'jerk':>10}{'total':>10}{'/ PID':>8}")
    for name, r in rows.items():
        print(f"{name:<18}{r['lataccel_cost']:>10.3f}{r['jerk_cost']:>10.3f}{r['total_cost']:>10.3f}{r['total_cost'] / pid:>8.3f}")
    print(f"\nPPO / PID: {out['ppo_over_pid']:.3f}   PPO / teacher: {out['ppo_over_teacher']:.3f}   training wall time: "
          f"{train_wall / 60:.1f} min   transitions: {ckpt['global_step']}   peak memory: {out['peak_rss_mb']:.0f} MB")
    run_dir = Path(cfg["runs_dir"]) / ckpt["config"]["run_name"]
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "quality.json").write_text(json.dumps(out, indent=2))
    if args.save_reference:
        ref = PROJECT_ROOT / "models" / "reference"
        ref.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ckpt_path, ref / "ppo_reference.pt")
        (ref / "quality.json").write_text(json.dumps(out, indent=2))
        print(f"reference policy written to {ref / 'ppo_reference.pt'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
