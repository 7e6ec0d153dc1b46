"""Simulator throughput: env-steps per second of the official shape, the bare model and the engine.

Usage (from the project root)::

    python bench/sim_throughput.py            # about 2-3 minutes on 2 cores
    python bench/sim_throughput.py --quick    # about 30 s: batches 1, 8, 64, one repeat
    python bench/sim_throughput.py --repeats 3 --batches 1 8 64 256

Configurations, each measured in its own subprocess (so its peak RSS is its own):

(a) ``reference``: one segment at a time, batch-1 model calls, single-thread onnxruntime session,
    PID: :func:`ppo_training.sim.reference.reference_rollout`, the shape of the official harness.
    It calls the model at every step (warm-up included) and reads the CSV inside the rollout, as
    the harness does.
(b) ``model``: the bare model call :meth:`OnnxBackend.logits` on random valid inputs at batch B;
    one env-step per batch row per call.
(c) ``engine``: :meth:`BatchedSimulator.rollout` with :class:`PIDController`, ``full=True`` (every
    row, like (a)), the real segments repeated to fill the batch.  Timed: building the simulator
    (padding, per-segment RandomState draws) and the rollout; not the CSV loading.

Counting: for (a) and (c) env-steps = simulated steps = rows - 20 per segment.  The engine skips
the model call in the 80 warm-up steps (its sample is discarded, exactly), so it also reports model
rows/s (rows of model input processed per second) and model calls/s.  ``(c)/(b)`` compares the
engine's model rows/s with the bare model's at the same batch and thread count: the share of the
model's throughput that survives the engine's own work.

Threads: (b) and (c) use onnxruntime's intra-op threads = all cores (the engine's default) and
also threads=1 at batch 1, comparable with (a).  Each number is the best of ``--repeats`` timed
runs, and (b) and (c) of one batch size run back to back, because the machine may be shared:
``bg`` is the CPU (in cores) that other processes used during the timed runs; on 2 cores, a ``bg``
above ~0.2 makes the all-core rows unreliable (onnxruntime's threads wait for each other).
Peak RSS is ``ru_maxrss`` of the configuration's subprocess (Python, numpy, pandas, onnxruntime
and the session included); ``base`` is its RSS just before the timed work.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

REAL_FILES = [f"data/0000{k}.csv" for k in range(8)]  # path strings as the harness sees them


# -- measurements (run inside a worker subprocess) --------------------------------------------------------
def rss_mb() -> float:
    """Current resident set size of this process, MB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KB on Linux


class Timer:
    """Wall time of a block, and the CPU that *other* processes used meanwhile (in cores).

    Background use comes from ``/proc/stat`` (all busy CPU time of the machine) minus this
    process's own CPU time; on a shared 2-core machine it explains outliers.
    """

    _TICK = os.sysconf("SC_CLK_TCK")

    @classmethod
    def _machine_busy(cls) -> float:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return (sum(v[:3]) + sum(v[5:8])) / cls._TICK  # user nice system . . irq softirq steal

    def __enter__(self) -> "Timer":
        t = os.times()
        self._own, self._busy, self._t0 = t.user + t.system, self._machine_busy(), time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.wall = time.perf_counter() - self._t0
        t = os.times()
        own = t.user + t.system - self._own
        self.background = max(0.0, (self._machine_busy() - self._busy - own) / self.wall)


def wait_quiet(max_wait: float, threshold: float = 0.15, window: float = 3.0) -> float:
    """Wait (at most ``max_wait`` s) until the machine's busy CPU over ``window`` s is under
    ``threshold`` cores; returns the seconds waited.  For shared machines (``--wait_quiet``)."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < max_wait:
        a = Timer._machine_busy()
        time.sleep(window)
        if (Timer._machine_busy() - a) / window < threshold:
            break
    return time.perf_counter() - t0


def best(timers: list[Timer], work: float) -> tuple[float, float]:
    """Best rate ``work / wall`` over the repeats, and the mean background load (cores)."""
    return work / min(t.wall for t in timers), statistics.mean(t.background for t in timers)


def single_thread_session(model_path: Path):
    """An onnxruntime session configured like the official harness (one thread)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(model_path.read_bytes(), options, ["CPUExecutionProvider"])


def measure_reference(cfg: dict) -> dict:
    from ppo_training.sim.backends import resolve_model_path
    from ppo_training.sim.reference import ReferencePID, reference_rollout

    session = single_thread_session(resolve_model_path(None))
    files = REAL_FILES[: cfg["segments"]]
    reference_rollout(session, files[0], ReferencePID(), end=120)  # warm the session up
    base = rss_mb()
    timers = []
    for _ in range(cfg["repeats"]):
        steps = 0
        with Timer() as t:
            for f in files:
                out = reference_rollout(session, f, ReferencePID())
                steps += len(out["current"]) - 20
        timers.append(t)
    env, bg = best(timers, steps)
    # the reference runs the model at every simulated step, batch 1
    return {"env": env, "rows": env, "calls": env, "base": base, "peak": peak_rss_mb(), "bg": bg,
            "detail": f"{len(files)} segment(s), {steps} steps per repeat"}


def measure_model(cfg: dict) -> dict:
    import numpy as np

    from ppo_training.sim.backends import OnnxBackend

    backend = OnnxBackend(threads=cfg["threads"])
    b = cfg["batch"]
    rng = np.random.default_rng(0)
    states = np.stack([
        rng.uniform(-2, 2, (b, 20)),      # steer action
        rng.uniform(-1, 1, (b, 20)),      # roll_lataccel
        rng.uniform(0, 40, (b, 20)),      # v_ego
        rng.uniform(-2, 2, (b, 20)),      # a_ego
    ], axis=-1).astype(np.float32)
    tokens = rng.integers(0, 1024, (b, 20), dtype=np.int64)
    for _ in range(5):
        backend.logits(states, tokens)
    base = rss_mb()
    # calls per repeat: about cfg["seconds"] of work, judged from a short probe
    t0 = time.perf_counter()
    for _ in range(3):
        backend.logits(states, tokens)
    n = max(3, int(cfg["seconds"] / ((time.perf_counter() - t0) / 3)))
    timers = []
    for _ in range(cfg["repeats"]):
        with Timer() as t:
            for _ in range(n):
                backend.logits(states, tokens)
        timers.append(t)
    calls_s, bg = best(timers, n)
    return {"env": calls_s * b, "rows": calls_s * b, "calls": calls_s, "base": base, "peak": peak_rss_mb(),
            "bg": bg, "detail": f"{1e3 / calls_s:.2f} ms per call"}


def measure_engine(cfg: dict) -> dict:
    from ppo_training.constants import CONTEXT_LENGTH, CONTROL_START_IDX
    from ppo_training.controllers import PIDController
    from ppo_training.data.segments import load_segments
    from ppo_training.sim.backends import OnnxBackend
    from ppo_training.sim.engine import BatchedSimulator

    backend = OnnxBackend(threads=cfg["threads"])
    real = load_segments(REAL_FILES)
    segments = [real[k % len(real)] for k in range(cfg["batch"])]
    # warm the session up at this batch size (a few steps past the warm-up)
    sim = BatchedSimulator(backend, segments, full=False)
    inputs, ctrl = sim.reset(), PIDController()
    ctrl.reset(sim.batch_size)
    while sim.step_idx < CONTROL_START_IDX + 3:
        inputs = sim.step(ctrl(inputs))
    base = rss_mb()

    def run():
        sim = BatchedSimulator(backend, segments, full=True)
        sim.rollout(PIDController())
        return sim

    if cfg.get("profile"):
        import cProfile
        import io
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        run()
        prof.disable()
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(14)
        print(buf.getvalue(), file=sys.stderr)

    timers = []
    for _ in range(cfg["repeats"]):
        with Timer() as t:
            sim = run()
        timers.append(t)
    rollouts_s, bg = best(timers, 1.0)
    env_steps = sum(s.n_rows - CONTEXT_LENGTH for s in segments)
    n_calls = sim.end_step - CONTROL_START_IDX  # every step from 100 to the longest segment's end
    return {"env": env_steps * rollouts_s, "rows": n_calls * len(segments) * rollouts_s,
            "calls": n_calls * rollouts_s, "base": base, "peak": peak_rss_mb(), "bg": bg,
            "detail": f"{1 / rollouts_s:.2f} s per rollout"}


MEASURE = {"reference": measure_reference, "model": measure_model, "engine": measure_engine}


def worker(cfg_json: str) -> None:
    os.chdir(ROOT)
    cfg = json.loads(cfg_json)
    out = MEASURE[cfg["kind"]](cfg)
    print("RESULT " + json.dumps(out))


# -- driver ------------------------------------------------------------------------------------------------
def run_config(cfg: dict) -> dict:
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(cfg)],
                          cwd=ROOT, capture_output=True, text=True)
    if proc.stderr.strip() and cfg.get("profile"):
        print(proc.stderr, file=sys.stderr)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"worker {cfg} failed (rc {proc.returncode}):\n{proc.stderr[-3000:]}")
    return {**cfg, **json.loads(lines[-1][len("RESULT "):])}


def fmt_rate(x: float) -> str:
    return f"{x:,.0f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="about 30 s: batches 1 8 64, one repeat, short runs")
    p.add_argument("--repeats", type=int, default=None, help="timed repeats per configuration (best; default 2, quick 1)")
    p.add_argument("--batches", type=int, nargs="+", default=None, help="batch sizes for (b) and (c) (default 1 8 64 256)")
    p.add_argument("--ref_segments", type=int, default=None, help="segments per repeat of (a) (default 4, quick 1)")
    p.add_argument("--profile", type=int, nargs="*", default=None,
                   help="cProfile the engine (all cores) at these batch sizes (stderr)")
    p.add_argument("--wait_quiet", type=float, default=0.0, metavar="S",
                   help="before each configuration wait up to S seconds for other processes to go idle "
                        "(for a shared machine; default 0: do not wait)")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        worker(args.worker)
        return 0

    import onnxruntime

    from ppo_training.sim.backends import resolve_model_path

    resolve_model_path(None)
    missing = [f for f in REAL_FILES if not (ROOT / f).is_file()]
    if missing:
        print(f"error: real segments missing under {ROOT}: {', '.join(missing)}", file=sys.stderr)
        return 1
    repeats = args.repeats or (1 if args.quick else 2)
    batches = args.batches or ([1, 8, 64] if args.quick else [1, 8, 64, 256])
    ref_segments = args.ref_segments or (1 if args.quick else 4)
    seconds = 0.4 if args.quick else 1.5
    cores = os.cpu_count()
    print(f"machine: {platform.machine()} {platform.processor() or ''}, {cores} cores, "
          f"onnxruntime {onnxruntime.__version__}, numpy {__import__('numpy').__version__}, "
          f"Python {platform.python_version()}; load average {os.getloadavg()[0]:.2f}")
    print(f"repeats {repeats} (best of), batches {batches}, reference segments {ref_segments}; "
          f"segments: the 8 real ones from data/, repeated to fill a batch")

    configs = [{"kind": "reference", "label": "(a) reference, batch-1 calls", "batch": 1, "threads": 1,
                "segments": ref_segments, "repeats": repeats}]
    # (b) and (c) of the same batch and threads back to back, so they see the same machine
    for b, threads in [(1, 1)] + [(b, None) for b in batches]:
        configs.append({"kind": "model", "label": "(b) bare model call", "batch": b, "threads": threads,
                        "seconds": seconds, "repeats": repeats})
        configs.append({"kind": "engine", "label": "(c) batched engine", "batch": b, "threads": threads,
                        "repeats": repeats, "profile": threads is None and b in (args.profile or [])})

    t_start = time.perf_counter()
    results = []
    waited = 0.0
    for cfg in configs:
        if args.wait_quiet > 0:
            waited += wait_quiet(args.wait_quiet)
        r = run_config(cfg)
        results.append(r)
        print(f"  done: {r['label']} batch {r['batch']} threads {r['threads'] or cores}: "
              f"{fmt_rate(r['env'])} env-steps/s ({r['detail']}, background {r['bg']:.2f} cores)", flush=True)

    ref = results[0]["env"]
    bare = {(r["batch"], r["threads"]): r["rows"] for r in results if r["kind"] == "model"}
    head = (f"{'config':<30}{'batch':>6}{'thr':>4}{'env-steps/s':>13}{'model rows/s':>14}"
            f"{'model calls/s':>15}{'vs (a)':>8}{'(c)/(b)':>9}{'base MB':>9}{'peak MB':>9}{'bg':>6}")
    print()
    print(head)
    print("-" * len(head))
    order = {"reference": 0, "model": 1, "engine": 2}
    for r in sorted(results, key=lambda r: (order[r["kind"]], r["threads"] is None, r["batch"])):
        cb = ""
        if r["kind"] == "engine" and (r["batch"], r["threads"]) in bare:
            cb = f"{r['rows'] / bare[(r['batch'], r['threads'])]:.2f}"
        print(f"{r['label']:<30}{r['batch']:>6}{r['threads'] or cores:>4}{fmt_rate(r['env']):>13}"
              f"{fmt_rate(r['rows']):>14}{fmt_rate(r['calls']):>15}{r['env'] / ref:>8.2f}{cb:>9}"
              f"{r['base']:>9.0f}{r['peak']:>9.0f}{r['bg']:>6.2f}")
    print(f"\nenv-steps: rows - 20 per segment for (a) and (c), one per batch row for (b). model rows/s: "
          f"rows of model input per second; (c)/(b) = engine's model rows/s / bare model's at the same "
          f"batch and threads. The engine runs {580 - 80} model calls per 580 env-steps (warm-up skipped). "
          f"bg: other processes' CPU use during the timed runs, in cores.")
    print(f"total {time.perf_counter() - t_start:.0f} s (of which {waited:.0f} s waiting for an idle machine); "
          f"load average at end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
