"""Evaluate a steering controller or a trained policy on driving segments (batched TinyPhysics).

    ppo-eval --controller pid --data_path data --num_segs 100 --output results.csv
    ppo-eval --model_path models/final_model.pt --data_path data --num_segs 100 \\
             --baseline pid --report report.html --output results.csv

(``python eval.py ...`` in the checkout runs the same.)

Segments are chosen like the official harness (sorted, first ``--num_segs``) and each one's random
seed comes from its path string, so run from the folder that holds ``data/`` with
``--data_path data`` to get the official harness's per-segment costs exactly.
"""
from __future__ import annotations

import argparse
import sys
import time

import pandas as pd

from ppo_training.controllers import make_controller
from ppo_training.data.segments import SegmentError, is_synthetic_dir, list_segment_files, load_segments
from ppo_training.evaluation import COST_COLUMNS, evaluate, training_overlap, write_results_csv
from ppo_training.sim.backends import make_backend
from ppo_training.sim.engine import BatchedSimulator


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model_path", help="a trained policy checkpoint (.pt from train.py)")
    p.add_argument("--controller", default=None,
                   help="pid, zero, teacher (the PID + feedforward controller that training clones), a "
                        "path to an official-format controller .py, or NAME for controllers/NAME.py "
                        "(default: pid; ignored with --model_path)")
    p.add_argument("--baseline", default=None,
                   help="controller to compare against (default: pid with --model_path, none otherwise; "
                        "'none' disables)")
    p.add_argument("--data_path", default="data", help="a segment CSV or a folder of them (default: data)")
    p.add_argument("--num_segs", type=int, default=100, help="first N sorted files (default: 100)")
    p.add_argument("--output", help="write per-segment costs to this CSV")
    p.add_argument("--report", help="write a self-contained HTML report here")
    p.add_argument("--device", default="auto",
                   help="auto | cpu | cuda (the policy runs in numpy; the simulator on onnxruntime CPU)")
    p.add_argument("--tinyphysics_model", default=None,
                   help="TinyPhysics ONNX model (default: models/tinyphysics.onnx of the project)")
    p.add_argument("--batch_size", type=int, default=256, help="segments per model call (default: 256)")
    p.add_argument("--threads", type=int, default=None, help="onnxruntime threads (default: all cores)")
    p.add_argument("--no_progress", action="store_true", help="hide the progress bar")
    return p


def sample_rollouts(controllers, segments: list[str], backend) -> dict:
    """Full-length histories of each controller on a few segments, for the report's plots."""
    segs = load_segments(segments)
    out = {}
    for ctrl in controllers:
        res = BatchedSimulator(backend, segs, full=True).rollout(ctrl, keep_histories=True) if ctrl else None
        for b, s in enumerate(segments):
            hist = {"target": res.target[b], "current": res.current[b], "action": res.action[b]} if res else None
            out.setdefault(s, []).append(hist)
    return {s: (h[0], h[1] if len(h) > 1 else None) for s, h in out.items()}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from ppo_training.utils.checkpoint import CheckpointError

    try:
        files = list_segment_files(args.data_path, args.num_segs)
        backend = make_backend("onnx", args.tinyphysics_model, threads=args.threads)
        notes = [f"data: {args.data_path}" + (" (synthetic segments)" if is_synthetic_dir(args.data_path) else "")]
        if args.model_path:
            from ppo_training.controllers.policy import PolicyController

            test = PolicyController.from_checkpoint(args.model_path)
            n_overlap = training_overlap(test.checkpoint, files)
            if n_overlap:
                msg = (f"WARNING: {n_overlap} of {len(files)} evaluated segments were in this policy's "
                       f"training files; these results are not held-out")
                print("\n" + "!" * len(msg) + f"\n{msg}\n" + "!" * len(msg) + "\n", file=sys.stderr)
                notes.append(msg)
            baseline_name = args.baseline or "pid"
        else:
            test = make_controller(args.controller or "pid")
            baseline_name = args.baseline or "none"
        baseline = None if baseline_name == "none" else make_controller(baseline_name)
        print(f"Evaluating {test.name} on {len(files)} segment(s) from {args.data_path}"
              f"{' against ' + baseline.name if baseline else ''}", file=sys.stderr)
        t0 = time.perf_counter()
        kw = dict(backend=backend, batch_size=args.batch_size, progress=not args.no_progress)
        res_test = evaluate(test, files, desc=f"eval {test.name}", **kw)
        res_base = evaluate(baseline, files, desc=f"eval {baseline.name}", **kw) if baseline else None
        wall = time.perf_counter() - t0
        report_html = None
        if args.report:
            from ppo_training.report import build_report

            table = res_test.table
            picks = list(dict.fromkeys([table.sort_values("total_cost")["segment"].iloc[len(table) // 2],
                                        *table.sort_values("total_cost", ascending=False)["segment"].head(2)]))
            samples = sample_rollouts([test, baseline], picks, backend)
            report_html = build_report(table, res_base.table if res_base else None,
                                       (test.name, baseline.name if baseline else ""), samples, notes)
    except (FileNotFoundError, SegmentError, ValueError, ImportError, CheckpointError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1

    rows = [(test.name, res_test.summary())]
    if res_base:
        rows.append((baseline.name, res_base.summary()))
    print(f"\n{'controller':<20}{'segments':>9}" + "".join(f"{c:>15}" for c in COST_COLUMNS))
    for name, m in rows:
        print(f"{name:<20}{len(files):>9}" + "".join(f"{m[c]:>15.4f}" for c in COST_COLUMNS))
    if res_base:
        mt, mb = rows[0][1], rows[1][1]
        print(f"{'ratio':<20}{'':>9}" + "".join(f"{mt[c] / mb[c]:>15.3f}" for c in COST_COLUMNS))
        print(f"\n{test.name} {'beat' if mt['total_cost'] < mb['total_cost'] else 'did NOT beat'} {baseline.name}")
    m = rows[0][1]
    print(f"\nAverage lataccel_cost: {m['lataccel_cost']:>6.4}, average jerk_cost: {m['jerk_cost']:>6.4}, "
          f"average total_cost: {m['total_cost']:>6.4}  ({wall:.1f} s)")
    if args.output:
        table = res_test.table
        if res_base:
            base = res_base.table.rename(columns={c: f"baseline_{c}" for c in COST_COLUMNS})
            table = pd.merge(table, base, on="segment", how="left", sort=False)
        write_results_csv(table, args.output)
        print(f"per-segment costs written to {args.output}")
    if report_html is not None:
        from ppo_training.report import write_report

        write_report(args.report, report_html)
        print(f"report written to {args.report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
