"""One configuration over several seeds: mean, spread and a bootstrap confidence interval.

A single training run says little about a configuration: seeds differ.  :func:`run_seeds` trains
the same config with seeds ``first_seed .. first_seed + n - 1`` into ``runs/<name>/seed_<s>/`` and
writes ``runs/<name>/seeds.json`` (each seed's best validation cost and validation curve, their
mean, standard deviation and bootstrap 95% confidence interval of the mean, and the teacher's
and PID's costs on the same validation files) and ``runs/<name>/seeds.png`` (the curves).
:func:`compare` puts two such runs side by side with the difference of their means and its
bootstrap confidence interval.
"""
from __future__ import annotations

import copy
import json
import math
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from .runner import train_and_score

N_BOOT = 10_000
Log = Callable[[str], None]


# -- statistics ------------------------------------------------------------------------------------
def bootstrap_ci(values: Sequence[float], *, n_boot: int = N_BOOT, level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the mean of ``values``."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        raise ValueError("no values to bootstrap")
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(n_boot, x.size))].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def bootstrap_diff_ci(a: Sequence[float], b: Sequence[float], *, n_boot: int = N_BOOT, level: float = 0.95,
                      seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of ``mean(b) - mean(a)`` (independent resamples)."""
    xa, xb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if xa.size == 0 or xb.size == 0:
        raise ValueError("both groups need values")
    rng = np.random.default_rng(seed)
    diff = (xb[rng.integers(0, xb.size, size=(n_boot, xb.size))].mean(axis=1)
            - xa[rng.integers(0, xa.size, size=(n_boot, xa.size))].mean(axis=1))
    lo, hi = np.quantile(diff, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def summarize(values: Sequence[float]) -> dict[str, Any]:
    """``n``, ``mean``, ``std`` (sample, None for one value) and ``ci95`` (bootstrap, of the mean)."""
    x = np.asarray(values, dtype=np.float64)
    return {"n": int(x.size), "mean": float(x.mean()), "std": float(x.std(ddof=1)) if x.size > 1 else None,
            "ci95": list(bootstrap_ci(x))}


# -- reference controllers ---------------------------------------------------------------------------
def reference_costs(cfg: dict) -> dict[str, Any]:
    """Mean cost of the teacher (PID + feedforward) and the PID on the run's validation files.

    The files are ``training.data_split(cfg)["val"]``, the ones each run validates on, rolled out
    with the exact onnxruntime backend, so the lines are comparable with the runs' curves.
    """
    from ..controllers import PIDController
    from ..controllers.policy import TeacherController
    from ..evaluation import evaluate
    from ..sim.backends import make_backend
    from ..training import data_split

    files = data_split(cfg)["val"]
    backend = make_backend("onnx", cfg.get("tinyphysics_model"))
    out: dict[str, Any] = {"n_files": len(files)}
    for name, ctrl in (("teacher", TeacherController()), ("pid", PIDController())):
        out[name] = float(evaluate(ctrl, files, backend=backend, progress=False).table["total_cost"].mean())
    return out


# -- the seed study ---------------------------------------------------------------------------------
def _jsonable(obj: Any) -> Any:
    """NaN and infinities become null (JSON has no such numbers)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    return obj


def run_seeds(cfg: dict, n_seeds: int, name: str, *, first_seed: int = 0, references: bool = True,
              params: dict[str, Any] | None = None, log: Log = print) -> dict[str, Any]:
    """Train ``cfg`` once per seed and summarise the best validation costs (see the module docstring).

    ``params`` (e.g. a trial's) are recorded in the summary; they should already be applied to ``cfg``.
    ``seeds.json`` and ``seeds.png`` are rewritten after every seed, so a cut run keeps its finished seeds.
    """
    if n_seeds < 1:
        raise ValueError(f"--seeds must be at least 1, got {n_seeds}")
    if not name or "/" in name or name in (".", ".."):
        raise ValueError(f"run name {name!r} must be non-empty and name one folder under runs/")
    out_dir = Path(cfg["runs_dir"]) / name
    out_dir.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {"name": name, "config": cfg, "params": params or {}, "seeds": [], "references": {}}
    if references:
        t0 = time.time()
        summary["references"] = refs = reference_costs(cfg)
        log(f"references on {refs['n_files']} validation files: teacher {refs['teacher']:.4f}, "
            f"pid {refs['pid']:.4f} ({time.time() - t0:.0f} s)")
    for i, seed in enumerate(range(first_seed, first_seed + n_seeds), 1):
        run_cfg = copy.deepcopy(cfg)
        run_cfg.update(seed=seed, runs_dir=str(out_dir), run_name=f"seed_{seed}")
        run_cfg["train"] = {**run_cfg["train"], "copy_final_model": False}
        t0 = time.time()
        outcome = train_and_score(run_cfg)
        res = outcome.result
        summary["seeds"].append({
            "seed": seed, "best_val_cost": outcome.value, "curve": [[s, c] for s, c in outcome.curve],
            "run_dir": str(res.run_dir), "best_checkpoint": str(outcome.best_checkpoint),
            "global_step": res.global_step, "stopped_reason": res.stopped_because,
            "minutes": (time.time() - t0) / 60,
        })
        summary.update(summarize([s["best_val_cost"] for s in summary["seeds"]]))
        write_summary(summary, out_dir)
        log(f"[{i}/{n_seeds}] seed {seed}: best validation cost {outcome.value:.4f} ({res.stopped_because}, "
            f"{res.global_step} steps, {(time.time() - t0) / 60:.1f} min)")
    log(format_summary(summary))
    log(f"wrote {out_dir / 'seeds.json'} and {out_dir / 'seeds.png'}")
    return summary


def write_summary(summary: dict[str, Any], out_dir: Path) -> None:
    tmp = out_dir / ".seeds.json.tmp"
    tmp.write_text(json.dumps(_jsonable(summary), indent=1, default=str))
    tmp.replace(out_dir / "seeds.json")
    from matplotlib.figure import Figure  # no pyplot: works headless and leaves a notebook's backend alone

    fig = Figure(figsize=(9, 5))
    seeds_figure([summary], ax=fig.subplots())
    fig.savefig(out_dir / "seeds.png", dpi=110, bbox_inches="tight")


def load_summary(run: str | Path, runs_dir: str | Path = "runs") -> dict[str, Any]:
    """A seed study's ``seeds.json``, given its folder, its json file or its name under ``runs_dir``."""
    path = Path(run)
    candidates = [path, path / "seeds.json", Path(runs_dir) / path / "seeds.json"]
    for p in candidates:
        if p.is_file():
            return json.loads(p.read_text())
    raise FileNotFoundError(f"{run}: no seeds.json (looked at {', '.join(map(str, candidates[1:]))}); "
                            f"run `python -m ppo_training.tune seeds --name NAME` first")


# -- reporting ---------------------------------------------------------------------------------------
def _fmt(x: float | None, digits: int = 4) -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{digits}f}"


def format_summary(summary: dict[str, Any]) -> str:
    lo, hi = summary["ci95"]
    return (f"{summary['name']}: {summary['n']} seeds, best validation cost mean {_fmt(summary['mean'])}, "
            f"std {_fmt(summary['std'])}, 95% CI of the mean [{_fmt(lo)}, {_fmt(hi)}]")


def compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Difference of the mean best validation cost ``b - a`` and its bootstrap 95% CI."""
    va = [s["best_val_cost"] for s in a["seeds"]]
    vb = [s["best_val_cost"] for s in b["seeds"]]
    diff = float(np.mean(vb) - np.mean(va))
    lo, hi = bootstrap_diff_ci(va, vb)
    if lo > 0:
        verdict = f"{a['name']} is lower (better): the interval excludes 0"
    elif hi < 0:
        verdict = f"{b['name']} is lower (better): the interval excludes 0"
    else:
        verdict = "no clear difference: the interval contains 0"
    return {"a": a["name"], "b": b["name"], "diff": diff, "ci95": [lo, hi], "verdict": verdict}


def compare_table(a: dict[str, Any], b: dict[str, Any]) -> str:
    """A plain-text table of both runs and their difference."""
    rows = [("run", "seeds", "mean", "std", "95% CI of the mean")]
    for s in (a, b):
        rows.append((s["name"], str(s["n"]), _fmt(s["mean"]), _fmt(s["std"]),
                     f"[{_fmt(s['ci95'][0])}, {_fmt(s['ci95'][1])}]"))
    c = compare(a, b)
    rows.append((f"{c['b']} - {c['a']}", "", f"{c['diff']:+.4f}", "",
                 f"[{c['ci95'][0]:+.4f}, {c['ci95'][1]:+.4f}]"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    refs = a.get("references") or b.get("references")
    if refs:
        lines.append(f"references: teacher {_fmt(refs.get('teacher'))}, pid {_fmt(refs.get('pid'))} "
                     f"(on {refs.get('n_files')} validation files)")
    lines.append(c["verdict"])
    return "\n".join(lines)


def seeds_figure(summaries: Sequence[dict[str, Any]], ax=None):
    """Validation curves of every seed (one colour per seed study) with teacher and PID lines."""
    import matplotlib

    if ax is None:
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(9, 5))
    else:
        fig = ax.figure
    colors = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, summary in enumerate(summaries):
        color = colors[k % len(colors)]
        for j, seed in enumerate(summary["seeds"]):
            curve = np.asarray([c for c in seed["curve"] if c[1] is not None], dtype=np.float64).reshape(-1, 2)
            label = (f"{summary['name']} (mean {_fmt(summary['mean'], 2)}, "
                     f"95% CI [{_fmt(summary['ci95'][0], 2)}, {_fmt(summary['ci95'][1], 2)}])") if j == 0 else None
            ax.plot(curve[:, 0], curve[:, 1], "-o", color=color, lw=1.2, ms=3, alpha=0.8, label=label)
    refs = next((s["references"] for s in summaries if s.get("references")), {})
    costs = [c[1] for s in summaries for seed in s["seeds"] for c in seed["curve"] if c[1] is not None]
    top = max(costs + [refs.get("teacher") or 0.0])
    for name, style in (("teacher", "--"), ("pid", ":")):
        value = refs.get(name)
        if value is None:
            continue
        if name == "pid" and costs and value > 2 * top:
            # far above the curves: stated, not drawn, so the curves keep the plot's height
            ax.text(0.99, 0.98, f"pid {value:.2f} (off scale)", transform=ax.transAxes, ha="right", va="top")
        else:
            ax.axhline(value, color="k", ls=style, lw=1.2, label=f"{name} {value:.2f}")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("validation cost (mean total_cost)")
    ax.set_title("validation cost per seed" + (f" ({len(summaries[0]['seeds'])} seeds)" if len(summaries) == 1 else ""))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig
