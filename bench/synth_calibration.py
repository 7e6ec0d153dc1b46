"""Compare real and synthetic segments: distributions of the simulator inputs and PID's cost.

Usage::

    python bench/synth_calibration.py [--real /work/shared/tinyphysics/data] \
        [--synthetic data/synthetic] [--n 200] [--no-pid]

For each set it prints mean / p10 / p90 over all rows of: speed ``v_ego`` (m/s), ``|target|``
(m/s^2), ``|target rate|`` (per-step difference / 0.1 s, m/s^3), ``roll_lataccel`` (m/s^2, signed),
and the mean PID ``total_cost`` from :func:`ppo_training.evaluation.evaluate_files`.  When the
synthetic folder does not exist, ``--n`` files are generated into a temporary folder.
Rows of generated data are labelled ``synthetic``.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ppo_training.data.stats import QUANTITIES, segment_values, summary  # noqa: E402
from ppo_training.data.segments import (  # noqa: E402
    is_synthetic_dir,
    list_segment_files,
)

DEFAULT_REAL = "/work/shared/tinyphysics/data"


def bootstrap_range(per_segment: list[dict[str, np.ndarray]], q: str, reps: int = 300,
                    seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """10th and 90th percentiles of the pooled stats when whole segments are resampled.

    With a handful of real segments this says how far the real numbers could move with another
    draw of segments, i.e. how precise a real-vs-synthetic comparison can be.
    """
    rng = np.random.default_rng(seed)
    n = len(per_segment)
    stats = np.array([summary([per_segment[i] for i in rng.integers(0, n, n)], q) for _ in range(reps)])
    return np.percentile(stats, 10, axis=0), np.percentile(stats, 90, axis=0)


def pid_cost(files: list[str], batch_size: int) -> str:
    """Mean PID total_cost as text, or why it is not available (never a made-up number)."""
    try:
        from ppo_training.evaluation import evaluate_files
    except ImportError:
        return "evaluation module not available"
    try:
        df = evaluate_files(files, controller="pid", batch_size=batch_size, progress=True)
    except FileNotFoundError as exc:  # e.g. the simulator model is not fetched
        return f"not computed ({exc})"
    return (f"{df['total_cost'].mean():.2f}  (lataccel_cost {df['lataccel_cost'].mean():.3f}, "
            f"jerk_cost {df['jerk_cost'].mean():.2f}, {len(df)} segments)")


def resolve_real(path: str | None) -> Path:
    if path is not None:
        return Path(path)
    for cand in (Path(DEFAULT_REAL), ROOT / "data"):
        if cand.is_dir() and any(cand.glob("*.csv")):
            return cand
    return Path(DEFAULT_REAL)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--real", default=None, help=f"real segments (default {DEFAULT_REAL}, else ./data)")
    p.add_argument("--synthetic", default="data/synthetic", help="synthetic folder (generated if absent)")
    p.add_argument("--n", type=int, default=200, help="files to generate when --synthetic is absent")
    p.add_argument("--seed", type=int, default=0, help="seed for generated files")
    p.add_argument("--num-segs", type=int, default=None, help="use at most this many files of each set")
    p.add_argument("--no-pid", action="store_true", help="skip the PID cost")
    p.add_argument("--batch-size", type=int, default=256)
    args = p.parse_args(argv)

    real_dir = resolve_real(args.real)
    real_files = list_segment_files(real_dir, args.num_segs)

    tmp = None
    syn_dir = Path(args.synthetic)
    if not syn_dir.is_dir():
        from ppo_training.data.synth import write_dataset

        tmp = tempfile.TemporaryDirectory(prefix="synth_calibration_")
        syn_dir = Path(tmp.name) / "synthetic"
        print(f"{args.synthetic} not found: generating {args.n} synthetic files (seed {args.seed}) in {syn_dir}")
        write_dataset(syn_dir, args.n, args.seed, progress=True)
    syn_files = list_segment_files(syn_dir, args.num_segs)
    syn_label = "synthetic" if is_synthetic_dir(syn_dir) else "synthetic? (NO MANIFEST)"
    real_label = "SYNTHETIC (manifest!)" if is_synthetic_dir(real_dir) else "real"

    sets = [(real_label, real_dir, real_files), (syn_label, syn_dir, syn_files)]
    values = {label: segment_values(files) for label, _, files in sets}

    print()
    for label, d, files in sets:
        print(f"{label:>10}: {len(files)} files from {d}")
    print()
    head = (f"{'quantity':<15}{'set':<11}{'mean':>8}{'p10':>8}{'p90':>8}   "
            f"{'syn/real: mean':>14}{'p10':>6}{'p90':>6}   real, 80% segment bootstrap (mean; p10; p90)")
    print(head)
    print("-" * len(head))
    for q in QUANTITIES:
        ref = summary(values[real_label], q)
        lo, hi = bootstrap_range(values[real_label], q)
        for label, _, _ in sets:
            st = summary(values[label], q)
            line = f"{q:<15}{label:<11}{st[0]:8.3f}{st[1]:8.3f}{st[2]:8.3f}   "
            if label == real_label:
                line += " " * 26 + "   " + "; ".join(f"{a:.3f}..{b:.3f}" for a, b in zip(lo, hi))
            else:
                ratios = [f"{a / b:.2f}" if abs(b) > 1e-2 else "-" for a, b in zip(st, ref)]
                line += f"{ratios[0]:>14}{ratios[1]:>6}{ratios[2]:>6}"
            print(line)
    print("units: speed m/s; |target|, roll_lataccel m/s^2; |target rate| m/s^3 (per-step diff / 0.1 s)."
          "\nratios are not shown where the real value is below 0.01 (relative error meaningless).")

    if not args.no_pid:
        print()
        for label, _, files in sets:
            print(f"PID cost ({label}, mean total_cost): {pid_cost(files, args.batch_size)}")
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
