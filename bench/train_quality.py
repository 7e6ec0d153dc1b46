#!/usr/bin/env python
"""Train with the default config on the real training segments within a time budget, then score
PID, the teacher the policy clones and the PPO policy on the eight evaluation segments
00000-00007 (never trained, validated or tuned on).

    python bench/train_quality.py --budget-min 60 [--run-name quality] [--config config.yaml] [--save-reference]
    python bench/train_quality.py --checkpoint runs/x/checkpoints/best.pt [--save-reference]

Prints mean costs, PPO / PID and PPO / teacher ratios, training wall time and peak memory, and
writes them with how the policy was made (config, seed, training and validation files, the
validation curve) to runs/<name>/quality.json.  ``--save-reference`` copies the evaluated policy
to models/reference/ppo_reference.pt and its quality.json beside it (keeping the figures of the
reference it replaces under ``previous``): this is how the committed reference policy is made.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
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
from ppo_training.evaluation import evaluate  # noqa: E402
from ppo_training.sim.backends import make_backend  # noqa: E402
from ppo_training.training import load_config, train  # noqa: E402
from ppo_training.utils.checkpoint import load_checkpoint  # noqa: E402

EVAL_FILES = [f"{k:05d}.csv" for k in range(8)]


def real_dir_default() -> Path:
    for folder in (PROJECT_ROOT / "data", PROJECT_ROOT.parent / "shared" / "tinyphysics" / "data"):
        if all((folder / f).is_file() for f in EVAL_FILES):
            return folder
    return PROJECT_ROOT / "data"


def peak_rss_mb() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, kids) / 1024.0


def score_checkpoint(ckpt_path: str | Path, real: Path, model_path: str | None = None) -> dict:
    """PID, the teacher and the checkpoint's policy on the eight evaluation segments, as ``data/0000k.csv``
    (the official harness's path strings, hence its seeds).

    Returns mean costs per controller (``rows``), per-segment total costs, PPO / PID and PPO / teacher
    ratios and peak memory.
    """
    policy = PolicyController.from_checkpoint(ckpt_path)
    ckpt = policy.checkpoint
    missing = [f for f in EVAL_FILES if not (Path(real) / f).is_file()]
    if missing:
        raise FileNotFoundError(f"{real}: the evaluation segments {', '.join(missing)} are missing; fetch the assets")
    backend = make_backend("onnx", model_path)
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:  # evaluate as data/0000k.csv: the official seeds
        (Path(tmp) / "data").mkdir()
        for f in EVAL_FILES:
            shutil.copy(Path(real) / f, Path(tmp) / "data" / f)
        os.chdir(tmp)
        try:
            files = [f"data/{f}" for f in EVAL_FILES]
            rows, per_segment = {}, {}
            for name, ctrl in (("pid", PIDController()), ("teacher", TeacherController()),
                               ("ppo", policy)):
                table = evaluate(ctrl, files, backend=backend, progress=False).table
                rows[name] = {c: float(table[c].mean()) for c in ("lataccel_cost", "jerk_cost", "total_cost")}
                per_segment[name] = table["total_cost"].tolist()
        finally:
            os.chdir(cwd)
    pid, teacher, ppo = (rows[k]["total_cost"] for k in ("pid", "teacher", "ppo"))
    return {"rows": rows, "per_segment_total_cost": per_segment, "segments": [f"data/{f}" for f in EVAL_FILES],
            "ppo_over_pid": ppo / pid, "ppo_over_teacher": ppo / teacher, "peak_rss_mb": peak_rss_mb(),
            "checkpoint": str(ckpt_path), "global_step": int(ckpt["global_step"])}


def provenance(ckpt: dict) -> dict:
    """How the policy was made: config, seed, files, validation curve (from its checkpoint)."""
    stats = ckpt.get("stats", {})
    files = ckpt.get("files", {})
    return {
        "config": ckpt["config"], "seed": ckpt["config"].get("seed"),
        "train_files": [Path(f).name for f in files.get("train", [])],
        "synthetic_files": len(files.get("synthetic", [])),
        "validation_files": [Path(f).name for f in files.get("val", [])],
        "validation_curve": {"step": stats.get("validation/cost_mean/step", []),
                             "cost": stats.get("validation/cost_mean", [])},
        "validation_references": ckpt.get("references", {}),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=None, help="training config (default: config.yaml)")
    p.add_argument("--budget-min", type=float, default=60.0, help="training wall-time budget")
    p.add_argument("--run-name", default="quality")
    p.add_argument("--real-dir", default=None, help="folder with the evaluation segments 00000.csv .. 00007.csv")
    p.add_argument("--checkpoint", default=None, help="skip training; evaluate this checkpoint")
    p.add_argument("--made-on", default=None, help="where the checkpoint was trained (recorded), e.g. 'NVIDIA H100'")
    p.add_argument("--save-reference", action="store_true")
    args = p.parse_args(argv)

    t0 = time.time()
    made_on = args.made_on or f"CPU ({os.cpu_count()} cores, {platform.machine()})"
    if args.checkpoint:
        ckpt_path = Path(args.checkpoint)
        train_wall = float("nan")
        stopped = "checkpoint given"
    else:
        cfg = load_config(args.config, {"run_name": args.run_name, "train.time_budget_s": args.budget_min * 60})
        data_path = Path(cfg["data"]["path"])
        cfg["data"]["path"] = str(data_path if data_path.is_absolute() else PROJECT_ROOT / data_path)
        cfg["runs_dir"] = str(PROJECT_ROOT / cfg["runs_dir"])
        result = train(cfg)
        train_wall = time.time() - t0
        ckpt_path = result.best_model or result.final_model
        stopped = result.stopped_because
        print(f"training stopped: {stopped} after {result.global_step} steps, "
              f"{train_wall / 60:.1f} min; best validation cost {result.best_val_cost:.3f}")
    out = score_checkpoint(ckpt_path, Path(args.real_dir) if args.real_dir else real_dir_default())
    ckpt = load_checkpoint(ckpt_path)
    out.update(train_wall_s=train_wall, stopped=stopped, made_on=made_on, made_at=_dt.datetime.now().isoformat(timespec="seconds"),
               command=" ".join(["python", "bench/train_quality.py", *(argv if argv is not None else sys.argv[1:])]),
               **provenance(ckpt))
    rows = out["rows"]
    pid = rows["pid"]["total_cost"]
    print(f"\nEvaluation segments: 8 (data/00000.csv .. 00007.csv); policy: {ckpt_path}")
    print(f"{'controller':<18}{'lataccel':>10}{'jerk':>10}{'total':>10}{'/ PID':>8}")
    for name, r in rows.items():
        print(f"{name:<18}{r['lataccel_cost']:>10.3f}{r['jerk_cost']:>10.3f}{r['total_cost']:>10.3f}{r['total_cost'] / pid:>8.3f}")
    print(f"\nPPO / PID: {out['ppo_over_pid']:.3f}   PPO / teacher: {out['ppo_over_teacher']:.3f}   training wall time: "
          f"{train_wall / 60:.1f} min   transitions: {ckpt['global_step']:,}   peak memory: {out['peak_rss_mb']:.0f} MB")
    run_dir = PROJECT_ROOT / "runs" / ckpt["config"]["run_name"]
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "quality.json").write_text(json.dumps(out, indent=2))
    if args.save_reference:
        ref = PROJECT_ROOT / "models" / "reference"
        ref.mkdir(parents=True, exist_ok=True)
        old = ref / "quality.json"
        if old.is_file():
            prev = json.loads(old.read_text())
            prev.pop("previous", None)
            out["previous"] = {k: prev[k] for k in ("rows", "ppo_over_pid", "ppo_over_teacher", "made_on", "made_at",
                                                    "global_step", "train_wall_s") if k in prev}
        tmp = ref / ".ppo_reference.pt.tmp"
        shutil.copyfile(ckpt_path, tmp)
        tmp.replace(ref / "ppo_reference.pt")
        old.write_text(json.dumps(out, indent=2))
        print(f"reference policy written to {ref / 'ppo_reference.pt'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
