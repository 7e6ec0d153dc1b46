#!/usr/bin/env python
"""The one-shot GPU run: every GPU check of the project in separate, individually time-limited steps.

``bash bench/gpu_run.sh OUTDIR`` runs the steps below, each as ``python bench/gpu_run.py STEP ...``
under its own ``timeout``; every step writes its results to ``WORK/parts/STEP.json`` and ``merge``
assembles ``OUTDIR/gpu_run.json`` (see bench/README.md for how to read it).

=========== ====================================================================================
info        the card, versions, the compiler toolchain torch.compile needs, the carried packages
correctness torch fp32 vs onnxruntime costs on the eight evaluation segments (``data/0000k.csv``,
            the official seeds); each precision's max relative logit error vs onnxruntime
throughput  simulator env-steps/s: fp32, tf32, bf16 at batch 8k, 32k, 128k eager, then compiled
            (``torch.compile`` reduce-overhead: CUDA graphs) as time allows: tf32 at 8k (the
            training setting), bf16 and fp32 at 32k and 128k; writes ``throughput.png``
eval5k      wall time of a 5,000-segment PID evaluation (the real segments tiled under distinct
            path strings: distinct simulator noise)
ppo         PPO end to end on the device (config.gpu.yaml, torch backend, BC off): transitions/s
            including updates
profile     only when a speed target is missed (or ``--force``): torch profiler tables of env
            steps and of one PPO update, and host reads per env step, into the log
train       config.gpu.yaml trained on the training segments for ``--train-min`` minutes, then
            PPO / PID / teacher on the eight evaluation segments; the checkpoint to OUTDIR
notebook    notebooks/02_train_ppo.ipynb under papermill (device, time budget); the executed
            notebook and its dashboard PNGs to OUTDIR
merge       OUTDIR/gpu_run.json: every figure, each step's status and wall time, the targets
=========== ====================================================================================

``--quick`` runs every step at toy size on the CPU (tiny batches, seconds of training).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import shutil
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

STEPS = ("info", "correctness", "throughput", "eval5k", "ppo", "profile", "train", "notebook")
PRECISIONS = ("fp32", "tf32", "bf16")
N_EVAL_FILES = 8          # data/00000.csv .. data/00007.csv: the official evaluation files we hold
RESERVED_BELOW = 5000     # files 00000 .. 04999 are the official evaluation set: never trained on

#: (key, direction, threshold, what): judged by ``merge`` on one H100.
TARGETS = (
    ("sim_fp32_env_steps_per_s", ">=", 1.5e6, "simulator fp32 env-steps/s, best batch (eager or compiled)"),
    ("sim_bf16_env_steps_per_s", ">=", 4.0e6, "simulator bf16 env-steps/s, best batch (eager or compiled)"),
    ("eval_5000_wall_s", "<=", 2.0, "wall time of a 5,000-segment PID evaluation, fp32 (s)"),
    ("ppo_transitions_per_s", ">=", 2.0e6, "PPO transitions/s including updates (config.gpu.yaml)"),
    ("ppo_over_pid", "<=", 0.45, "trained PPO / PID mean total_cost on the 8 evaluation segments, "
                                  "after <= 6 minutes of training"),
)
SPEED_TARGETS = TARGETS[:4]
MAX_TRAIN_MIN_FOR_TARGET = 6.0


# -- plumbing -----------------------------------------------------------------------------------------
@dataclasses.dataclass
class Ctx:
    args: argparse.Namespace
    work: Path
    out: Path
    assets: Path
    device: str
    quick: bool
    t0: float = dataclasses.field(default_factory=time.time)

    @property
    def model(self) -> Path:
        return self.assets / "models" / "tinyphysics.onnx"

    @property
    def data(self) -> Path:
        return self.assets / "data"

    def left(self) -> float:
        """Seconds until this step's deadline (infinite without one)."""
        d = self.args.step_deadline
        return float("inf") if not d else d - time.time()

    def write(self, step: str, data: dict) -> None:
        """Write (replace) this step's part atomically; called again as results accumulate."""
        parts = self.work / "parts"
        parts.mkdir(parents=True, exist_ok=True)
        tmp = parts / f".{step}.json.tmp"
        tmp.write_text(json.dumps(data, indent=1, default=_json_default))
        tmp.replace(parts / f"{step}.json")


def _json_default(x):
    if hasattr(x, "item"):
        return x.item()
    if isinstance(x, Path):
        return str(x)
    raise TypeError(f"not JSON serialisable: {type(x).__name__}")


def say(*a) -> None:
    print(*a, flush=True)


def sync(device: str) -> None:
    import torch

    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def load_pool(ctx: Ctx) -> list:
    """Every segment under the assets' data/ (evaluation and training files), loaded once."""
    from ppo_training.data.segments import list_segment_files, load_segments

    return load_segments(list_segment_files(ctx.data))


def tiled(pool: list, n: int) -> list:
    """``n`` segments cycling through ``pool`` under distinct path strings (distinct simulator noise).

    Tiles share the pool's arrays, so the engine lays each distinct segment out only once.
    """
    return [dataclasses.replace(pool[k % len(pool)], path=f"gpu_run/tile_{k:07d}.csv") for k in range(n)]


def training_dir(ctx: Ctx) -> Path:
    """A folder of links to the training files only: every CSV whose name is not an evaluation file.

    The official evaluation files are 00000.csv .. 04999.csv; they are left out by name here, so no
    data split setting can send one of them into training or validation.
    """
    folder = ctx.work / "train_segments"
    if not folder.is_dir():
        folder.mkdir(parents=True)
        for f in sorted(ctx.data.glob("*.csv")):
            if not is_evaluation_file(f.name):
                (folder / f.name).symlink_to(f.resolve())
    if not any(folder.iterdir()):
        raise FileNotFoundError(f"no training segments (names from {RESERVED_BELOW:05d}.csv on) in {ctx.data}")
    return folder


def is_evaluation_file(name: str) -> bool:
    stem = Path(name).stem
    return stem.isdigit() and int(stem) < RESERVED_BELOW


def gpu_config(ctx: Ctx, overrides: dict) -> dict:
    """config.gpu.yaml on the carried assets; quick mode shrinks it to toy size."""
    from ppo_training.training import load_config

    over = {
        "device": ctx.device, "tinyphysics_model": str(ctx.model), "data.path": str(training_dir(ctx)),
        "runs_dir": str(ctx.work / "runs"), "logging.progress": False, "train.copy_final_model": False,
    }
    if ctx.quick:
        over.update({"env.n_envs": 4, "env.compile": False, "bc.episodes": 1, "bc.epochs": 1,
                     "data.val_segments": 2, "train.eval_every": 1, "ppo.update_epochs": 2,
                     "ppo.num_minibatches": 4})
    over.update(overrides)
    return load_config(ROOT / "config.gpu.yaml", over)


# -- steps ---------------------------------------------------------------------------------------------
#: Requirements of the carried packages that are left out on purpose (never imported here).
UNUSED_REQUIREMENTS = {"aiohttp", "debugpy"}


def carried_wheels(root: Path = ROOT) -> list[tuple[str, str]]:
    """(distribution name, version) of each wheel in ``.whl/``."""
    out = []
    for w in sorted((root / ".whl").glob("*.whl")):
        name, version = w.name.split("-")[:2]
        out.append((name, version))
    return out


def check_requirements(dists: list[tuple[str, str]]) -> dict:
    """Each carried distribution's declared requirements against what this interpreter can import.

    Returns ``installed`` (name -> version found, or None), ``missing`` and ``conflicts`` (requirement
    strings, with the version found), ignoring extras and :data:`UNUSED_REQUIREMENTS`.
    """
    from importlib import metadata

    from packaging.requirements import Requirement

    def version_of(name: str):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    out: dict = {"installed": {}, "missing": [], "conflicts": []}
    for name, wanted in dists:
        got = version_of(name)
        out["installed"][name] = got
        if got is None:
            out["missing"].append(f"{name}=={wanted} (carried)")
            continue
        if got != wanted:
            out["conflicts"].append(f"{name}=={wanted} carried, {got} imported")
        for spec in metadata.requires(name) or []:
            req = Requirement(spec)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            if req.name.lower() in UNUSED_REQUIREMENTS:
                continue
            have = version_of(req.name)
            if have is None:
                out["missing"].append(f"{req} (for {name})")
            elif not req.specifier.contains(have, prereleases=True):
                out["conflicts"].append(f"{req} (for {name}): {have} found")
    return out


def step_info(ctx: Ctx) -> None:
    import importlib
    import sysconfig

    out: dict = {"python": sys.version.split()[0], "executable": sys.executable, "platform": platform.platform(),
                 "cpu_count": os.cpu_count(), "device": ctx.device, "quick": ctx.quick}
    for name in ("numpy", "torch", "onnxruntime", "onnx", "pandas", "matplotlib", "gymnasium", "papermill",
                 "nbclient", "nbformat", "jupyter_client", "ipykernel", "IPython", "ipywidgets", "jupyter_ui_poll",
                 "zmq", "tornado", "yaml", "tqdm", "tensorboard"):
        try:
            m = importlib.import_module(name)
            out.setdefault("packages", {})[name] = {"version": getattr(m, "__version__", "?"),
                                                    "from": str(Path(m.__file__).parent)}
        except Exception as exc:  # record every missing package, fail at the end
            out.setdefault("missing", {})[name] = f"{type(exc).__name__}: {exc}"
    wheels = carried_wheels()
    if wheels:
        out["requirements"] = check_requirements(wheels)
        say(f"carried packages: {len(wheels)}; missing requirements: {out['requirements']['missing'] or 'none'}; "
            f"version conflicts: {out['requirements']['conflicts'] or 'none'}")
    # torch.compile (inductor + Triton) builds small C helpers: it needs a C compiler and Python.h
    include = sysconfig.get_paths().get("include") or ""
    out["compile_toolchain"] = {"cc": shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc"),
                                "python_h": (Path(include) / "Python.h").is_file()}
    try:
        import torch
    except Exception as exc:
        out["torch_error"] = f"{type(exc).__name__}: {exc}"
        ctx.write("info", out)
        say(json.dumps(out, indent=1))
        raise
    out["torch"] = torch.__version__
    out["torch_cuda"] = torch.version.cuda
    if ctx.device.startswith("cuda"):
        if not torch.cuda.is_available():
            ctx.write("info", out)
            raise SystemExit("CUDA requested but torch.cuda.is_available() is False")
        props = torch.cuda.get_device_properties(0)
        out.update({"card": torch.cuda.get_device_name(0), "gpu_memory_gib": props.total_memory / 2**30,
                    "capability": f"{props.major}.{props.minor}", "gpu_count": torch.cuda.device_count()})
    else:
        out["card"] = f"CPU ({platform.processor() or platform.machine()})"
    assets = {"model": ctx.model.is_file(), "csv": len(list(ctx.data.glob("*.csv"))),
              "evaluation_files": sorted(f.name for f in ctx.data.glob("*.csv") if is_evaluation_file(f.name))}
    out["assets"] = assets
    ctx.write("info", out)
    say(json.dumps(out, indent=1))
    if out.get("missing"):
        raise SystemExit(f"missing packages: {', '.join(out['missing'])}")
    if not assets["model"] or len(assets["evaluation_files"]) < N_EVAL_FILES:
        raise SystemExit(f"assets incomplete under {ctx.assets}: {assets}")


def step_correctness(ctx: Ctx) -> None:
    import numpy as np
    import torch

    from ppo_training.controllers import PIDController
    from ppo_training.evaluation import evaluate
    from ppo_training.sim.backends import OnnxBackend, TorchBackend

    # the official seeds: path strings data/0000k.csv, run from the assets folder
    files = [f"data/{k:05d}.csv" for k in range(4 if ctx.quick else N_EVAL_FILES)]
    os.chdir(ctx.assets)
    onnx = OnnxBackend(ctx.model)
    ref = evaluate(PIDController(), files, backend=onnx, progress=False).table["total_cost"].to_numpy()
    out: dict = {"segments": files, "onnx_total_cost": ref.tolist(), "costs": {}, "logits": {}}
    n = 32 if ctx.quick else 512
    rng = np.random.default_rng(0)
    states = np.concatenate([rng.uniform(-2, 2, (n, 20, 1)), rng.normal(0, 1, (n, 20, 1)),
                             rng.uniform(0, 35, (n, 20, 1)), rng.normal(0, 1, (n, 20, 1))], -1).astype(np.float32)
    tokens = rng.integers(0, 1024, (n, 20)).astype(np.int64)
    ref_logits = onnx.logits(states, tokens)[:, -1]
    s_t, k_t = torch.as_tensor(states, device=ctx.device), torch.as_tensor(tokens, device=ctx.device)
    for prec in PRECISIONS:
        be = TorchBackend(ctx.model, device=ctx.device, precision=prec)
        got = be.logits(s_t, k_t).float().cpu().numpy()
        rel = float(np.abs(got - ref_logits).max() / np.abs(ref_logits).max())
        out["logits"][prec] = {"max_rel_err_vs_onnxruntime": rel, "inputs": n}
        if prec == "fp32" or not ctx.quick:
            costs = evaluate(PIDController(), files, backend=be, progress=False).table["total_cost"].to_numpy()
            d = np.abs(costs - ref)
            out["costs"][prec] = {"total_cost": costs.tolist(), "max_abs_diff": float(d.max()),
                                  "identical": int((d == 0).sum()), "mean_change": float(costs.mean() - ref.mean())}
        say(f"{prec}: logits max rel err {rel:.2e}"
            + (f"; costs max |d| {out['costs'][prec]['max_abs_diff']:.4g}, identical "
               f"{out['costs'][prec]['identical']}/{len(files)}" if prec in out["costs"] else ""))
    fp32 = out["costs"]["fp32"]
    out["fp32_max_abs_total_cost_diff"] = fp32["max_abs_diff"]
    # fp32 on a GPU differs from onnxruntime by float rounding only: a token moves only where a
    # uniform falls within that rounding of a probability bin boundary (rare).
    out["checks"] = {"fp32_logits_rel_err_le_1e-5": out["logits"]["fp32"]["max_rel_err_vs_onnxruntime"] <= 1e-5,
                     "fp32_costs_identical_ge_75pct": fp32["identical"] >= 0.75 * len(files),
                     # bf16 (8-bit mantissa) logits: max error ~0.1 of the largest logit on random inputs
                     "bf16_logits_rel_err_le_0.25": out["logits"]["bf16"]["max_rel_err_vs_onnxruntime"] <= 0.25}
    ctx.write("correctness", out)


def _measure(sim, backend, steps: int, device: str) -> tuple[float, float]:
    """(env-steps/s over ``steps`` model-calling steps, seconds of the 3 untimed model steps)."""
    from ppo_training.constants import CONTROL_START_IDX
    from ppo_training.controllers import PIDController

    sim.backend = backend
    ctrl = PIDController()
    ctrl.reset(sim.batch_size)
    inputs = sim.reset()
    while inputs.step < CONTROL_START_IDX:  # warm-up: no model calls
        inputs = sim.step(ctrl(inputs))
    sync(device)
    t0 = time.perf_counter()
    for _ in range(3):  # first calls: lazy init, compilation, CUDA-graph warm-up and recording
        inputs = sim.step(ctrl(inputs))
    sync(device)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(steps):
        inputs = sim.step(ctrl(inputs))
    sync(device)
    return sim.batch_size * steps / (time.perf_counter() - t0), first


def _free(device: str) -> None:
    import gc

    import torch

    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def step_throughput(ctx: Ctx) -> None:
    import torch

    from ppo_training.sim.backends import TorchBackend
    from ppo_training.sim.engine import BatchedSimulator

    batches = [8, 16] if ctx.quick else [8192, 32768, 131072]
    steps = 2 if ctx.quick else 20
    pool = load_pool(ctx)
    out: dict = {"batches": batches, "timed_model_steps": steps, "pool_segments": len(pool),
                 "controller": "pid", "eager": {}, "compiled": {}, "compile": {}, "sim_build_s": {}}
    sims: dict[int, BatchedSimulator] = {}

    def sim_for(b: int):
        if b not in sims:
            t0 = time.perf_counter()
            sims[b] = BatchedSimulator(TorchBackend(ctx.model, device=ctx.device), tiled(pool, b))
            sync(ctx.device)
            out["sim_build_s"][str(b)] = time.perf_counter() - t0
        return sims[b]

    def run(mode: str, prec: str, be, b: int, budget_s: float) -> bool:
        if ctx.left() < budget_s:
            out[mode].setdefault(prec, {})[str(b)] = None
            out.setdefault("skipped", []).append(f"{mode} {prec} batch {b}: step deadline")
            say(f"skip {mode} {prec} batch {b}: {ctx.left():.0f} s left")
            return False
        try:
            sps, first = _measure(sim_for(b), be, steps, ctx.device)
        except torch.OutOfMemoryError:
            sps, first = None, None
            out.setdefault("oom", []).append(f"{mode} {prec} batch {b}")
            _free(ctx.device)
        except RuntimeError as exc:  # a kernel refusing a shape: recorded, the other sizes still run
            sps, first = None, None
            out.setdefault("errors", []).append(f"{mode} {prec} batch {b}: {type(exc).__name__}: {str(exc)[:300]}")
            say(f"{mode:8s} {prec} batch {b:>7d}: failed: {str(exc)[:200]}")
            _free(ctx.device)
        out[mode].setdefault(prec, {})[str(b)] = sps
        if mode == "compiled":
            out["compile"].setdefault(prec, {}).setdefault("first_calls_s", {})[str(b)] = first
            out["compile"][prec]["compiled"] = bool(be.compiled)
            out["compile"][prec]["error"] = be.compile_error
        say(f"{mode:8s} {prec} batch {b:>7d}: " + (f"{sps:12,.0f} env-steps/s (first 3 calls {first:.2f} s)"
                                                     if sps is not None else "out of memory"))
        ctx.write("throughput", out)
        return True

    for prec in PRECISIONS:  # eager first: the main figures, cheap
        be = TorchBackend(ctx.model, device=ctx.device, precision=prec)
        for b in batches:
            run("eager", prec, be, b, 5.0)
        del be
    _free(ctx.device)
    plot_throughput(ctx, out)
    # compiled: bf16 and fp32 (the targets) first, then tf32 (the training precision); one
    # compiled model alive at a time (CUDA-graph memory pools are large at 128k)
    # (each precision and batch size is a compilation of its own, ~10-30 s: first tf32 at 8k, the
    # training configuration, which leaves its compiled graph in the on-disk cache for the ppo,
    # train and notebook steps; then the targets' precisions at the large batches)
    plan = {"fp32": batches[:1]} if ctx.quick else {"tf32": batches[:1], "bf16": batches[1:], "fp32": batches[1:]}
    options = {"backend": "eager"} if ctx.quick else None  # quick: graph capture only, no compiler
    for prec, compiled_batches in plan.items():
        be = TorchBackend(ctx.model, device=ctx.device, precision=prec, compile=True, compile_options=options)
        for b in compiled_batches:
            if not run("compiled", prec, be, b, 25.0):
                break
            if not be.compiled:  # compilation failed: recorded; the rest would only repeat eager
                out["compile"][prec]["note"] = "compilation failed; fell back to eager"
                break
        del be
        if not ctx.quick:
            torch._dynamo.reset()
        _free(ctx.device)
    best: dict = {}
    for mode in ("eager", "compiled"):
        for prec, row in out[mode].items():
            for b, sps in row.items():
                if sps is not None and not math.isnan(sps) and sps > best.get(prec, {}).get("env_steps_per_s", -1):
                    best[prec] = {"env_steps_per_s": sps, "batch": int(b), "mode": mode}
    out["best"] = best
    ctx.write("throughput", out)
    plot_throughput(ctx, out)


def plot_throughput(ctx: Ctx, out: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    colors = {"fp32": "tab:blue", "tf32": "tab:green", "bf16": "tab:red"}
    for mode, style in (("eager", "-o"), ("compiled", "--s")):
        for prec, row in out.get(mode, {}).items():
            pts = [(int(b), v / 1e6) for b, v in row.items() if v is not None and not math.isnan(v)]
            if pts:
                ax.plot(*zip(*sorted(pts)), style, color=colors[prec], label=f"{prec} {mode}")
    for key, _d, thr, _w in SPEED_TARGETS[:2]:
        prec = key.split("_")[1]
        ax.axhline(thr / 1e6, color=colors[prec], lw=0.8, ls=":", label=f"{prec} target")
    ax.set_xscale("log", base=2)
    ax.set_xticks(out["batches"], [f"{b:,}" for b in out["batches"]])
    ax.minorticks_off()
    ax.set_xlabel("batch (segments stepped together)")
    ax.set_ylabel("M env-steps/s")
    card = read_part(ctx.work, "info").get("card", ctx.device)
    ax.set_title(f"TinyPhysics simulator throughput, PID controller ({card})", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(ctx.out / "throughput.png", dpi=100)
    plt.close(fig)


def step_eval5k(ctx: Ctx) -> None:
    from ppo_training.constants import CONTROL_START_IDX
    from ppo_training.controllers import PIDController
    from ppo_training.sim.backends import TorchBackend
    from ppo_training.sim.engine import BatchedSimulator

    n = 8 if ctx.quick else 5000
    pool = load_pool(ctx)
    segs = tiled(pool, n)
    out: dict = {"segments": n, "data": f"the {len(pool)} real segments tiled to {n} rows under distinct path "
                 "strings (distinct simulator noise); one batch, PID, cost-only rollouts, eager", "runs": {}}
    for prec in (("fp32", "bf16") if ctx.quick else PRECISIONS):
        be = TorchBackend(ctx.model, device=ctx.device, precision=prec)
        if not ctx.quick:  # warm-up at the full batch: kernels loaded, cuBLAS handles and heuristics
            warm, ctrl = BatchedSimulator(be, segs), PIDController()
            ctrl.reset(n)
            inputs = warm.reset()
            while inputs.step < CONTROL_START_IDX + 3:
                inputs = warm.step(ctrl(inputs))
            del warm, inputs
        sync(ctx.device)
        t0 = time.perf_counter()
        sim = BatchedSimulator(be, segs)
        sync(ctx.device)
        t1 = time.perf_counter()
        res = sim.rollout(PIDController())  # ends with the costs on the host
        t2 = time.perf_counter()
        out["runs"][prec] = {"wall_s": t2 - t0, "build_s": t1 - t0, "rollout_s": t2 - t1,
                             "mean_total_cost": float(res.costs["total_cost"].mean())}
        say(f"eval {n} segments {prec}: {t2 - t0:.2f} s (build {t1 - t0:.2f} s), PID mean "
            f"{res.costs['total_cost'].mean():.3f}")
        ctx.write("eval5k", out)
        del sim, res
        _free(ctx.device)
    out["wall_s"] = out["runs"]["fp32"]["wall_s"]
    ctx.write("eval5k", out)


def step_ppo(ctx: Ctx) -> None:
    import numpy as np

    from ppo_training.training import train

    n_updates = 2 if ctx.quick else 4
    probe = gpu_config(ctx, {})
    batch = int(probe["env"]["n_envs"]) * int(probe["train"]["num_steps"])
    cfg = gpu_config(ctx, {"run_name": "ppo_throughput", "bc.enabled": False,
                           "train.total_timesteps": n_updates * batch, "train.eval_every": 10**6,
                           "train.checkpoint_every": 10**6, "train.time_budget_s": None})
    t0 = time.perf_counter()
    with CompileWarnings() as cw:
        r = train(cfg)
    wall = time.perf_counter() - t0
    sps = [float(x) for x in r.stats["charts/env_steps_per_second"]]
    steady = sps[1:] if len(sps) > 1 else sps  # the first update includes compilation / warm-up
    out = {"n_envs": cfg["env"]["n_envs"], "num_steps": cfg["train"]["num_steps"], "updates": len(sps),
           "precision": cfg["env"]["precision"], "compile": cfg["env"]["compile"],
           "transitions_per_update": batch, "per_update_transitions_per_s": sps,
           "transitions_per_s": float(np.median(steady)), "first_update_s": batch / sps[0] if sps else None,
           "wall_s": wall, "compile_warnings": cw.messages,
           "note": "median over the updates after the first; includes rollouts, episode restarts and PPO "
                   "updates, not the validation"}
    say(f"PPO end to end: {out['transitions_per_s']:,.0f} transitions/s (per update: "
        f"{', '.join(f'{x:,.0f}' for x in sps)})")
    ctx.write("ppo", out)


class CompileWarnings:
    """Records (and still shows) the warnings of the simulator's ``torch.compile`` fallback."""

    def __enter__(self):
        import warnings

        self.messages: list[str] = []
        self._show = warnings.showwarning

        def show(message, category, filename, lineno, file=None, line=None):
            if "torch.compile" in str(message):
                self.messages.append(str(message)[:2000])
            self._show(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        return self

    def __exit__(self, *exc):
        import warnings

        warnings.showwarning = self._show


def missed_speed_targets(work: Path) -> list[str]:
    values = target_values(work)
    return [key for key, d, thr, _w in SPEED_TARGETS if not judge(values.get(key), d, thr)["met"]]


class HostTransfers:
    """Counts, in a torch dispatch mode, the operations that move data between host and device.

    ``host_reads``: ``.item()``, ``bool(tensor)``, ... of any tensor, ``device_reads`` of those
    of tensors on a GPU (each a device synchronisation);
    ``host_arrays``: tensors made from host data (``torch.as_tensor(numpy)``), which reach a GPU by
    a synchronous copy.
    """

    def __enter__(self):
        from torch.utils._python_dispatch import TorchDispatchMode

        counts = self.counts = {"host_reads": 0, "device_reads": 0, "host_arrays": 0}

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                name = str(func)
                if "_local_scalar_dense" in name:
                    counts["host_reads"] += 1
                    counts["device_reads"] += args[0].device.type != "cpu"
                elif "lift_fresh" in name:
                    counts["host_arrays"] += 1
                return func(*args, **(kwargs or {}))

        self.mode = Mode()
        self.mode.__enter__()
        return self

    def __exit__(self, *exc):
        self.mode.__exit__(*exc)


def step_profile(ctx: Ctx) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    from ppo_training.environment.lateral_env import VectorizedLateralControlEnv
    from ppo_training.policy.ppo_agent import PPOAgent, PPOConfig
    from ppo_training.sim.backends import TorchBackend
    from ppo_training.training import build_policy, data_split, env_config_of
    from ppo_training.utils.replay_buffer import RolloutBuffer

    missed = missed_speed_targets(ctx.work)
    if not missed and not ctx.args.force:
        ctx.write("profile", {"ran": False, "reason": "every speed target met"})
        say("profile: every speed target met; nothing to profile")
        return
    cfg = gpu_config(ctx, {})
    n_envs, dev = int(cfg["env"]["n_envs"]), ctx.device
    cuda = dev.startswith("cuda")
    # eager model: the profile then names the simulator's kernels (a CUDA graph shows as one)
    be = TorchBackend(ctx.model, device=dev, precision=cfg["env"]["precision"])
    env = VectorizedLateralControlEnv(data_split(cfg)["train"], n_envs, backend=be, config=env_config_of(cfg),
                                      paired=True)
    policy = build_policy(cfg).to(dev)
    obs, _ = env.reset(seed=0)

    def env_step(obs):
        with torch.no_grad():
            raw, action, logp, value = policy.act(obs)
        obs, reward, *_ = env.step(action)
        return obs

    for _ in range(3):
        obs = env_step(obs)
    sort = "cuda_time_total" if cuda else "cpu_time_total"
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    out: dict = {"ran": True, "missed": missed, "n_envs": n_envs, "precision": cfg["env"]["precision"]}
    with HostTransfers() as ht:
        obs = env_step(obs)
    out["env_step_host_reads"], out["env_step_host_arrays"] = ht.counts["host_reads"], ht.counts["host_arrays"]
    out["env_step_device_reads"] = ht.counts["device_reads"]
    if cuda:
        import warnings

        torch.cuda.set_sync_debug_mode("warn")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            obs = env_step(obs)
        torch.cuda.set_sync_debug_mode(0)
        out["env_step_cuda_syncs"] = sum("synchroniz" in str(w.message) for w in caught)
    sync(dev)
    t0 = time.perf_counter()
    for _ in range(5):
        obs = env_step(obs)
    sync(dev)
    out["env_step_ms"] = (time.perf_counter() - t0) / 5 * 1e3
    with profile(activities=acts) as prof:
        for _ in range(5):
            obs = env_step(obs)
        sync(dev)
    say(f"\n=== profile: 5 env steps (policy + simulator + features), {n_envs} envs, eager "
        f"{cfg['env']['precision']}; {out['env_step_ms']:.2f} ms per step outside the profiler, host reads "
        f"per step {out['env_step_host_reads']}, host arrays per step {out['env_step_host_arrays']}")
    say(prof.key_averages().table(sort_by=sort, row_limit=15))
    out["env_top_ops"] = _top_ops(prof, cuda)

    num_steps = int(cfg["train"]["num_steps"])
    buf = RolloutBuffer(num_steps, n_envs, env_config_of(cfg).obs_dim, dev)
    g = torch.Generator(device=dev).manual_seed(0)
    buf.obs.normal_(generator=g)
    buf.raw.normal_(generator=g)
    buf.logprobs.normal_(generator=g)
    buf.advantages.normal_(generator=g)
    buf.returns.normal_(generator=g)
    buf.values.normal_(generator=g)
    ppo = PPOConfig(**{**cfg["ppo"], "target_kl": None})  # every minibatch of every epoch
    agent = PPOAgent(policy, ppo)
    gen = torch.Generator().manual_seed(0)
    agent.update(buf, generator=gen)  # warm-up
    sync(dev)
    t0 = time.perf_counter()
    with HostTransfers() as ht:
        agent.update(buf, generator=gen)
        sync(dev)
    out["update_s"] = time.perf_counter() - t0
    out["update_host_reads"], out["update_device_reads"] = ht.counts["host_reads"], ht.counts["device_reads"]
    out["update_minibatches"] = ppo.update_epochs * ppo.num_minibatches
    with profile(activities=acts) as prof:
        agent.update(buf, generator=gen)
        sync(dev)
    say(f"\n=== profile: one PPO update ({num_steps} x {n_envs} transitions, {ppo.update_epochs} epochs x "
        f"{ppo.num_minibatches} minibatches); {out['update_s']:.3f} s outside the profiler; reads of device "
        f"values {out['update_device_reads']} (one per minibatch is the KL early-stop check)")
    say(prof.key_averages().table(sort_by=sort, row_limit=15))
    out["update_top_ops"] = _top_ops(prof, cuda)
    per_update = num_steps * out["env_step_ms"] / 1e3 + out["update_s"]
    out["estimate"] = {"rollout_s": num_steps * out["env_step_ms"] / 1e3, "update_s": out["update_s"],
                       "transitions_per_s_without_episode_restarts": num_steps * n_envs / per_update}
    ctx.write("profile", out)


def _top_ops(prof, cuda: bool, n: int = 8) -> list[dict]:
    rows = []
    for e in prof.key_averages():
        t = (getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)) if cuda else e.cpu_time_total
        rows.append({"op": e.key, "time_ms": t / 1e3, "calls": e.count})
    return sorted(rows, key=lambda r: -r["time_ms"])[:n]


def step_train(ctx: Ctx) -> None:
    import numpy as np

    from ppo_training.training import data_split, train

    sys.path.insert(0, str(ROOT / "bench"))
    from train_quality import score_checkpoint

    budget = 3.0 if ctx.quick else ctx.args.train_min * 60
    reserve = 20.0 if ctx.quick else 60.0  # start-up, behaviour cloning, final validation, scoring
    if ctx.left() - reserve < budget:
        budget = ctx.left() - reserve
        say(f"train: only {ctx.left():.0f} s left in this step: training budget cut to {budget:.0f} s")
    if budget < (1 if ctx.quick else 30):
        raise SystemExit(f"train: not enough time left ({ctx.left():.0f} s)")
    cfg = gpu_config(ctx, {"run_name": "gpu_train", "train.time_budget_s": budget})
    split = data_split(cfg)
    leaked = [f for k in ("train", "val") for f in split[k] if is_evaluation_file(f)]
    if leaked:
        raise SystemExit(f"evaluation files in the training split: {leaked[:5]}")
    t0 = time.perf_counter()
    with CompileWarnings() as cw:
        r = train(cfg)
    wall = time.perf_counter() - t0
    ckpt = r.best_model or r.final_model
    q = score_checkpoint(ckpt, ctx.data, str(ctx.model))
    shutil.copyfile(ckpt, ctx.out / "ppo_gpu.pt")
    s = r.stats
    sps = s.get("charts/env_steps_per_second", [])
    out = {
        "train_budget_s": budget, "train_minutes": budget / 60, "wall_s": wall, "stopped_because": r.stopped_because,
        "global_step": r.global_step, "updates": len(sps), "n_envs": cfg["env"]["n_envs"],
        "files": {k: len(v) for k, v in split.items()}, "best_val_cost": r.best_val_cost,
        "validation_curve": list(zip(s.get("validation/cost_mean/step", []), s.get("validation/cost_mean", []))),
        "episode_cost_curve": list(zip(s.get("episode/cost_mean/step", []), s.get("episode/cost_mean", []))),
        "transitions_per_s_median": float(np.median(sps)) if sps else None,
        "bc": {k[3:]: v[0] for k, v in s.items() if k.startswith("bc/") and not k.endswith("/step")},
        "checkpoint": "ppo_gpu.pt (" + Path(ckpt).name + ")", "compile_warnings": cw.messages,
        "ppo_over_pid": q["ppo_over_pid"], "ppo_over_teacher": q["ppo_over_teacher"], "rows": q["rows"],
    }
    say(f"train: {r.stopped_because} after {r.global_step} transitions ({len(sps)} updates, {wall:.0f} s); "
        f"PPO / PID {q['ppo_over_pid']:.3f}, PPO / teacher {q['ppo_over_teacher']:.3f}")
    ctx.write("train", out)


def install_kernel_spec(work: Path, name: str = "gpu_run_python3") -> str:
    """A Jupyter kernel spec for this very interpreter under ``work``; returns its name.

    The kernel gets this process's PYTHONPATH plus the project root (the carried packages and
    ``ppo_training`` import there), and Jupyter's and IPython's folders point into ``work`` so no
    user configuration or home folder is read or written.
    """
    kernels = work / "jupyter" / "kernels" / name
    kernels.mkdir(parents=True, exist_ok=True)
    pythonpath = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH", ""), str(ROOT)) if p)
    (kernels / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (gpu_run)", "language": "python",
        "env": {"PYTHONPATH": pythonpath, "MPLBACKEND": "Agg", "PYTHONUNBUFFERED": "1"}}, indent=1))
    for var, sub in (("JUPYTER_PATH", "jupyter"), ("JUPYTER_RUNTIME_DIR", "jupyter_runtime"),
                     ("JUPYTER_CONFIG_DIR", "jupyter_config"), ("IPYTHONDIR", "ipython")):
        os.environ[var] = str(work / sub)
        (work / sub).mkdir(parents=True, exist_ok=True)
    return name


def step_notebook(ctx: Ctx) -> None:
    import logging

    import papermill as pm
    import yaml

    logging.basicConfig(level=logging.INFO, format="[notebook %(asctime)s] %(message)s", datefmt="%H:%M:%S",
                        stream=sys.stdout)  # the kernel's output, timed

    from ppo_training.training import load_config

    budget = 2.0 if ctx.quick else float(ctx.args.nb_budget_s)
    reserve = 40.0 if ctx.quick else 35.0  # kernel start, imports, behaviour cloning, figures
    if ctx.left() - reserve < budget:
        budget = max(ctx.left() - reserve, 1.0)  # the first update runs whatever the budget
        say(f"notebook: training budget cut to {budget:.0f} s by the step deadline")
    # 2,048 envs: a one-minute run then still makes several updates after its start-up (reference
    # costs, cloning, the first validation)
    cfg = gpu_config(ctx, {"runs_dir": str(ctx.work / "nb_runs"), **({} if ctx.quick else {"env.n_envs": 2048})})
    config = ctx.work / "notebook_config.yaml"
    config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    load_config(config)  # fail here, not in the kernel, if it does not load
    kernel = install_kernel_spec(ctx.work)
    params = {"config_path": str(config), "device": ctx.device, "run_name": "notebook", "time_budget_s": budget}
    out_nb = ctx.out / "train_ppo.ipynb"
    cell_timeout = max(int(ctx.left() - 10), 10) if ctx.left() != float("inf") else None
    t0 = time.perf_counter()
    result: dict = {"parameters": params, "kernel": kernel, "executed_notebook": out_nb.name}
    try:
        pm.execute_notebook(str(ROOT / "notebooks" / "02_train_ppo.ipynb"), str(out_nb), parameters=params,
                            cwd=str(ROOT), kernel_name=kernel, progress_bar=False, log_output=True,
                            execution_timeout=cell_timeout, start_timeout=120)
    finally:
        result["wall_s"] = time.perf_counter() - t0
        run_dir = ctx.work / "nb_runs" / "notebook"
        for name in ("dashboard.png", "sample_rollout.png"):
            if (run_dir / name).is_file():
                shutil.copyfile(run_dir / name, ctx.out / name)
                result.setdefault("figures", []).append(name)
        if out_nb.is_file():
            nb = json.loads(out_nb.read_text())
            cells = [c for c in nb["cells"] if c["cell_type"] == "code"]
            result["image_outputs"] = sum("image/png" in o.get("data", {}) for c in cells for o in c.get("outputs", []))
            result["errors"] = [o.get("ename") for c in cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
            texts = [o["text"] for o in cells[-1].get("outputs", []) if "text" in o]
            result["text_tail"] = "".join("".join(t) if isinstance(t, list) else t for t in texts)[-600:]
        ctx.write("notebook", result)
    say(f"notebook: {result['wall_s']:.0f} s, {result.get('image_outputs', 0)} figures; {result.get('text_tail', '')}")


# -- merge ---------------------------------------------------------------------------------------------
def read_part(work: Path, name: str) -> dict:
    f = Path(work) / "parts" / f"{name}.json"
    try:
        return json.loads(f.read_text())
    except (OSError, ValueError):
        return {}


def target_values(work: Path) -> dict:
    tp, ev, ppo, tr = (read_part(work, n) for n in ("throughput", "eval5k", "ppo", "train"))
    best = tp.get("best", {})
    if not best:  # a throughput step cut short: best of what it measured
        for mode in ("eager", "compiled"):
            for prec, row in tp.get(mode, {}).items():
                vals = [v for v in row.values() if v is not None and not math.isnan(v)]
                if vals and max(vals) > best.get(prec, {}).get("env_steps_per_s", -1):
                    best[prec] = {"env_steps_per_s": max(vals)}
    values = {
        "sim_fp32_env_steps_per_s": best.get("fp32", {}).get("env_steps_per_s"),
        "sim_bf16_env_steps_per_s": best.get("bf16", {}).get("env_steps_per_s"),
        "eval_5000_wall_s": ev.get("runs", {}).get("fp32", {}).get("wall_s") if ev.get("segments") == 5000 else None,
        "ppo_transitions_per_s": ppo.get("transitions_per_s"),
        "ppo_over_pid": tr.get("ppo_over_pid") if tr.get("train_minutes", 99) <= MAX_TRAIN_MIN_FOR_TARGET else None,
    }
    if ev.get("segments") not in (None, 5000):  # quick mode: judged on its toy size, labelled as such
        values["eval_5000_wall_s"] = ev.get("runs", {}).get("fp32", {}).get("wall_s")
    return values


def judge(value, direction: str, threshold: float) -> dict:
    """met, and by how much: ``margin_pct`` > 0 is the headroom, < 0 how far it fell short."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return {"value": None, "target": f"{direction} {threshold:g}", "met": False, "margin_pct": None,
                "missing": True}
    if direction == ">=":
        met, margin = value >= threshold, (value / threshold - 1.0) * 100
        short = None if met else threshold - value
    else:
        met, margin = value <= threshold, (1.0 - value / threshold) * 100
        short = None if met else value - threshold
    return {"value": value, "target": f"{direction} {threshold:g}", "met": bool(met), "margin_pct": margin,
            "missed_by": short}


def merge(ctx: Ctx) -> int:
    status = {}
    for f in sorted((ctx.work / "status").glob("*.json")):
        s = json.loads(f.read_text())
        status[s["step"]] = s
    parts = {name: read_part(ctx.work, name) for name in STEPS}
    info = parts["info"]
    values = target_values(ctx.work)
    targets = {}
    for key, d, thr, what in TARGETS:
        targets[key] = {"what": what, **judge(values.get(key), d, thr)}
    tr = parts.get("train", {})
    if tr:
        targets["ppo_over_pid"]["train_minutes"] = tr.get("train_minutes")
    if parts.get("eval5k"):
        targets["eval_5000_wall_s"]["segments"] = parts["eval5k"].get("segments")
    result = {
        "schema": 1, "quick": ctx.quick,
        "card": info.get("card"), "torch": info.get("torch"), "torch_cuda": info.get("torch_cuda"),
        "python": info.get("python"), "device": ctx.device,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ctx.args.started or ctx.t0)),
        "total_wall_s": time.time() - (ctx.args.started or ctx.t0),
        "steps": {name: status.get(name, {"status": "not run"}) for name in STEPS},
        "targets": targets,
        "targets_met": sum(t["met"] for t in targets.values()), "targets_total": len(targets),
        **{name: parts[name] for name in STEPS},
    }
    out = ctx.out / "gpu_run.json"
    tmp = ctx.out / ".gpu_run.json.tmp"
    tmp.write_text(json.dumps(result, indent=1, default=_json_default))
    tmp.replace(out)
    print_summary(result)
    return 0


def _fmt(key: str, v) -> str:
    if v is None:
        return "-"
    if key.endswith("per_s"):
        return f"{v / 1e6:.3f} M/s" if v >= 1e4 else f"{v:.0f}/s"
    if key.endswith("wall_s"):
        return f"{v:.2f} s"
    return f"{v:.3f}"


def print_summary(r: dict) -> None:
    say(f"\nGPU run on {r['card']} (torch {r['torch']}, CUDA {r['torch_cuda']}, Python {r['python']})"
        f"{' [quick: toy sizes on the CPU]' if r['quick'] else ''}; {r['total_wall_s']:.0f} s")
    say(f"{'step':<13}{'status':<10}{'wall':>8}{'limit':>8}")
    for name, s in r["steps"].items():
        wall = f"{s['wall_s']:.0f} s" if s.get("wall_s") is not None else "-"
        lim = f"{s['limit_s']} s" if s.get("limit_s") is not None else "-"
        say(f"{name:<13}{s['status']:<10}{wall:>8}{lim:>8}")
    say(f"\n{'target':<28}{'value':>12}{'target':>15}{'met':>6}{'margin':>9}")
    for key, t in r["targets"].items():
        thr = t["target"]
        tv = thr.split()[0] + " " + _fmt(key, float(thr.split()[1]))
        margin = f"{t['margin_pct']:+.0f}%" if t.get("margin_pct") is not None else "-"
        say(f"{key:<28}{_fmt(key, t['value']):>12}{tv:>15}{'yes' if t['met'] else 'NO':>6}{margin:>9}")
    c = r.get("correctness", {})
    if c:
        lg = c.get("logits", {})
        say("\ncorrectness: fp32 vs onnxruntime max |d total_cost| "
            f"{c.get('fp32_max_abs_total_cost_diff', float('nan')):.4g}; logits max rel err "
            + ", ".join(f"{p} {lg[p]['max_rel_err_vs_onnxruntime']:.1e}" for p in lg))
    say(f"{r['targets_met']}/{r['targets_total']} targets met")


# -- main ---------------------------------------------------------------------------------------------
def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("step", choices=(*STEPS, "merge"))
    p.add_argument("--work", required=True, help="scratch folder shared by the steps (parts/, status/)")
    p.add_argument("--out", required=True, help="OUTDIR: at most 8 files come back from it")
    p.add_argument("--assets", default=str(ROOT / ".gpu_assets"), help="folder with models/ and data/")
    p.add_argument("--device", default=None, help="default: cuda when available, else cpu")
    p.add_argument("--quick", action="store_true", help="toy sizes on the CPU: checks that every step runs")
    p.add_argument("--train-min", type=float, default=2.5, help="training minutes of the train step")
    p.add_argument("--nb-budget-s", type=float, default=60.0, help="training seconds of the notebook step")
    p.add_argument("--step-deadline", type=float, default=None, help="epoch seconds this step must end by")
    p.add_argument("--started", type=float, default=None, help="epoch seconds the whole run started")
    p.add_argument("--force", action="store_true", help="profile even when every speed target is met")
    args = p.parse_args(argv)
    if args.device is None:
        if args.quick or args.step == "merge":  # merge never needs torch (it may be what failed)
            args.device = "cpu"
        else:
            try:
                import torch

                args.device = "cuda" if torch.cuda.is_available() else "cpu"
            except Exception:  # the steps report it; info still records everything else
                args.device = "cuda"
    ctx = Ctx(args, Path(args.work).resolve(), Path(args.out).resolve(), Path(args.assets).resolve(),
              args.device, args.quick)
    ctx.out.mkdir(parents=True, exist_ok=True)
    if args.step == "merge":
        return merge(ctx)
    # `timeout` ends a step with SIGTERM: unwind (finally blocks, the notebook's kernel shut down)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(124))
    if args.device == "cpu":
        import torch

        torch.set_num_threads(1)  # toy batches: more threads only contend (as in training on the CPU)
    t0 = time.perf_counter()
    globals()[f"step_{args.step}"](ctx)
    say(f"step {args.step} done in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
