#!/usr/bin/env python
"""Evaluate a steering controller on driving segments with the batched TinyPhysics simulator.

    python eval.py --controller pid --data_path data --num_segs 100 --output results.csv

Segments are chosen like the official harness (sorted, first ``--num_segs``) and each one's random
seed comes from its path string, so run from the folder that holds ``data/`` with
``--data_path data`` to get the official harness's per-segment costs exactly.
"""
from __future__ import annotations

import argparse
import sys
import time

from ppo_training.controllers import make_controller
from ppo_training.data.segments import SegmentError, is_synthetic_dir, list_segment_files
from ppo_training.evaluation import COST_COLUMNS, evaluate, write_results_csv
from ppo_training.sim.backends import make_backend


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--controller", default="pid",
                   help="pid, zero, a path to an official-format controller .py, or NAME for "
                        "controllers/NAME.py (default: pid)")
    p.add_argument("--data_path", default="data", help="a segment CSV or a folder of them (default: data)")
    p.add_argument("--num_segs", type=int, default=100, help="first N sorted files (default: 100)")
    p.add_argument("--output", help="write per-segment costs to this CSV")
    p.add_argument("--tinyphysics_model", default=None,
                   help="TinyPhysics ONNX model (default: models/tinyphysics.onnx of the project)")
    p.add_argument("--batch_size", type=int, default=256, help="segments per model call (default: 256)")
    p.add_argument("--threads", type=int, default=None, help="onnxruntime threads (default: all cores)")
    p.add_argument("--no_progress", action="store_true", help="hide the progress bar")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        files = list_segment_files(args.data_path, args.num_segs)
        backend = make_backend("onnx", args.tinyphysics_model, threads=args.threads)
        controller = make_controller(args.controller)
        label = " (synthetic segments)" if is_synthetic_dir(args.data_path) else ""
        print(f"Evaluating {controller.name} on {len(files)} segment(s) from {args.data_path}{label}",
              file=sys.stderr)
        t0 = time.perf_counter()
        result = evaluate(controller, files, backend=backend, batch_size=args.batch_size,
                          progress=not args.no_progress)
        wall = time.perf_counter() - t0
    except (FileNotFoundError, SegmentError, ValueError, ImportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    means = result.summary()
    print(f"\n{'controller':<12}{'segments':>9}" + "".join(f"{c:>15}" for c in COST_COLUMNS))
    print(f"{controller.name:<12}{len(files):>9}" + "".join(f"{means[c]:>15.4f}" for c in COST_COLUMNS))
    print(f"\nAverage lataccel_cost: {means['lataccel_cost']:>6.4}, average jerk_cost: "
          f"{means['jerk_cost']:>6.4}, average total_cost: {means['total_cost']:>6.4}  ({wall:.1f} s)")
    if args.output:
        write_results_csv(result.table, args.output)
        print(f"per-segment costs written to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
