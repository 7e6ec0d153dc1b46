"""Wall time of evaluating PID on 64 segments: the official harness's shape against ``eval.py``.

Usage (from the project root)::

    python bench/harness_vs_eval.py [--data_path DIR] [--num_segs 64] [--workers 16] [--repeats 1]

(i)  ``harness``: the shape of the official ``tinyphysics.py --num_segs 64``: one rollout task per
     segment through ``concurrent.futures.ProcessPoolExecutor(16)`` (``chunksize=10`` like its
     ``process_map``); each task creates its own single-thread onnxruntime session and runs
     :func:`ppo_training.sim.reference.reference_rollout` over the full segment.  Run as a
     subprocess of this script, so its wall time includes interpreter start-up like (ii).
(ii) ``eval.py``: ``python eval.py --controller pid --data_path DIR --num_segs 64`` as a
     subprocess (wall time including start-up).

Both use the first ``num_segs`` sorted files of DIR with the same path strings (the seed keys),
so the per-segment costs, and hence the means, must agree exactly; the script checks that.
Default data: ``data/synthetic`` if it holds at least ``num_segs`` CSVs, else the 8 real segments
of ``data/`` copied round-robin into a temporary folder (named ``00000.csv`` ...).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

REAL_FILES = [ROOT / "data" / f"0000{k}.csv" for k in range(8)]


def machine_busy_s() -> float:
    """Busy CPU seconds of the whole machine so far (``/proc/stat``), all cores together."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:3]) + sum(v[5:8])) / os.sysconf("SC_CLK_TCK")


# -- (i) the official harness's shape (runs in a subprocess) --------------------------------------------
def harness_task(path: str) -> dict:
    """One official rollout task: its own single-thread session, the full segment, PID."""
    import onnxruntime as ort

    from ppo_training.sim.backends import resolve_model_path
    from ppo_training.sim.reference import ReferencePID, reference_rollout

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(resolve_model_path(None).read_bytes(), options, ["CPUExecutionProvider"])
    out = reference_rollout(session, path, ReferencePID())
    return {k: float(out[k]) for k in ("lataccel_cost", "jerk_cost", "total_cost")}


def harness_main(data_path: str, num_segs: int, workers: int, out_json: str) -> None:
    from concurrent.futures import ProcessPoolExecutor

    from ppo_training.data.segments import list_segment_files

    files = list_segment_files(data_path, num_segs)
    t0 = time.perf_counter()
    with ProcessPoolExecutor(workers) as pool:
        costs = list(pool.map(harness_task, files, chunksize=10))
    pool_s = time.perf_counter() - t0
    Path(out_json).write_text(json.dumps({"files": files, "costs": costs, "pool_s": pool_s}))


# -- driver ---------------------------------------------------------------------------------------------
def timed(cmd: list[str]) -> tuple[float, float, subprocess.CompletedProcess]:
    """Run ``cmd`` from the project root; wall seconds, other processes' CPU (cores), the result."""
    busy0, t0 = machine_busy_s(), time.perf_counter()
    before = os.times()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = os.times()
    ours = (after.children_user + after.children_system) - (before.children_user + before.children_system)
    background = max(0.0, (machine_busy_s() - busy0 - ours) / wall)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed (rc {proc.returncode}):\n{proc.stderr[-3000:]}")
    return wall, background, proc


def choose_data(arg: str | None, num_segs: int, tmp: Path) -> tuple[str, str]:
    """The data folder to use (as passed to both runs) and a description of it."""
    from ppo_training.data.segments import is_synthetic_dir

    def n_csv(d: Path) -> int:
        return sum(1 for p in d.iterdir() if p.suffix == ".csv") if d.is_dir() else 0

    if arg is not None:
        n = n_csv(ROOT / arg if not Path(arg).is_absolute() else Path(arg))
        if n < num_segs:
            raise SystemExit(f"error: {arg} holds {n} CSV files, fewer than --num_segs {num_segs}")
        kind = "synthetic" if is_synthetic_dir(ROOT / arg) else "real"
        return arg, f"{arg} ({kind}, first {num_segs} of {n} sorted files)"
    if n_csv(ROOT / "data" / "synthetic") >= num_segs:
        n = n_csv(ROOT / "data" / "synthetic")
        return "data/synthetic", f"data/synthetic (synthetic, first {num_segs} of {n} sorted files)"
    missing = [str(f) for f in REAL_FILES if not f.is_file()]
    if missing:
        raise SystemExit(f"error: no data/synthetic with {num_segs} files and real segments missing: {missing}")
    folder = tmp / "data"
    folder.mkdir()
    for k in range(num_segs):
        shutil.copy(REAL_FILES[k % len(REAL_FILES)], folder / f"{k:05d}.csv")
    return str(folder), (f"{folder} (the 8 real segments data/0000[0-7].csv copied round-robin to "
                         f"{num_segs} files; data/synthetic has fewer than {num_segs})")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data_path", default=None, help="segment folder (default: see above)")
    p.add_argument("--num_segs", type=int, default=64)
    p.add_argument("--workers", type=int, default=16, help="harness process-pool size (official: 16)")
    p.add_argument("--repeats", type=int, default=1, help="runs of each; the best wall time is reported")
    p.add_argument("--harness_worker", nargs=4, metavar=("DATA", "N", "WORKERS", "OUT"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.harness_worker:
        data, n, workers, out = args.harness_worker
        harness_main(data, int(n), int(workers), out)
        return 0

    import numpy as np
    import onnxruntime
    import pandas as pd

    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, onnxruntime {onnxruntime.__version__}, "
          f"Python {platform.python_version()}; load average {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        data, described = choose_data(args.data_path, args.num_segs, tmp)
        print(f"data: {described}")
        out_json, out_csv = tmp / "harness.json", tmp / "eval.csv"
        harness_cmd = [sys.executable, str(Path(__file__).resolve()), "--harness_worker", data,
                       str(args.num_segs), str(args.workers), str(out_json)]
        eval_cmd = [sys.executable, "eval.py", "--controller", "pid", "--data_path", data,
                    "--num_segs", str(args.num_segs), "--no_progress", "--output", str(out_csv)]
        runs: dict[str, list[tuple[float, float]]] = {"harness": [], "eval": []}
        for r in range(args.repeats):
            wall, bg, _ = timed(harness_cmd)
            pool_s = json.loads(out_json.read_text())["pool_s"]
            runs["harness"].append((wall, bg, pool_s))
            print(f"  run {r + 1}: harness {wall:.1f} s (pool {pool_s:.1f} s, background {bg:.2f} cores)", flush=True)
            wall, bg, _ = timed(eval_cmd)
            runs["eval"].append((wall, bg, None))
            print(f"  run {r + 1}: eval.py {wall:.1f} s (background {bg:.2f} cores)", flush=True)

        harness = json.loads(out_json.read_text())
        h_costs = np.array([c["total_cost"] for c in harness["costs"]])
        table = pd.read_csv(out_csv)
        e_costs = table["total_cost"].to_numpy()
        same_paths = table["segment"].tolist() == harness["files"]
        h_mean, e_mean = float(np.mean(h_costs)), float(np.mean(e_costs))
        per_segment_equal = same_paths and np.array_equal(h_costs, e_costs)

    h_best = min(runs["harness"], key=lambda x: x[0])
    e_best = min(runs["eval"], key=lambda x: x[0])
    head = f"{'method':<58}{'wall s':>8}{'segs/s':>8}{'bg':>6}{'mean total_cost':>18}"
    print()
    print(head)
    print("-" * len(head))
    print(f"{f'(i) harness shape: ProcessPoolExecutor({args.workers}), 1 session/task':<58}"
          f"{h_best[0]:>8.1f}{args.num_segs / h_best[0]:>8.2f}{h_best[1]:>6.2f}{h_mean:>18.10f}")
    print(f"{'(ii) eval.py --controller pid (subprocess)':<58}"
          f"{e_best[0]:>8.1f}{args.num_segs / e_best[0]:>8.2f}{e_best[1]:>6.2f}{e_mean:>18.10f}")
    print(f"\nspeed-up of eval.py over the harness shape: {h_best[0] / e_best[0]:.2f}x "
          f"(harness pool alone {h_best[2]:.1f} s; wall times include interpreter start-up; "
          f"best of {args.repeats}; bg = other processes' CPU use in cores)")
    print(f"path strings identical: {same_paths}; per-segment total_cost identical: {per_segment_equal}; "
          f"means equal exactly: {h_mean == e_mean} ({h_mean!r} vs {e_mean!r})")
    if not (per_segment_equal and h_mean == e_mean):
        diff = np.abs(h_costs - e_costs) if len(h_costs) == len(e_costs) else None
        print(f"MISMATCH: max per-segment difference {None if diff is None else diff.max()}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
