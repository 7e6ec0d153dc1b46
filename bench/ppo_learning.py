#!/usr/bin/env python
"""Does PPO learn?  Train for a wall-clock budget and follow the validation cost against the
teacher the policy clones and against PID, on real validation segments (never the evaluation
files 00000-04999).

    python bench/ppo_learning.py --budget-min 60
    python bench/ppo_learning.py --budget-min 10 --set ppo.exploration=ar1 --set "env.prediction=false" \\
                                 [--seed 0] [--name NAME] [--no-default]

Each ``--set`` group (space-separated ``key=value`` pairs, values parsed as YAML) is one
configuration of an ablation; the default config runs first unless ``--no-default``.  Every
configuration gets the same budget and seed and runs alone, one after the other, in a child
process (so each one's peak memory is its own).  Prints a table and writes
``runs/ppo_learning/<name>/results.json`` and ``curves.png`` (validation cost over training time,
with the teacher's and PID's costs as reference lines).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ppo_training.training import load_config  # noqa: E402


def parse_group(text: str) -> dict:
    """``"a.b=1 c=x"`` -> ``{"a.b": 1, "c": "x"}`` (values parsed as YAML)."""
    out = {}
    for item in text.split():
        if "=" not in item:
            raise ValueError(f"--set {text!r}: expected key=value pairs, got {item!r}")
        key, value = item.split("=", 1)
        out[key] = yaml.safe_load(value)
    return out


def label_of(overrides: dict) -> str:
    return "default" if not overrides else " ".join(f"{k}={v}" for k, v in overrides.items())


def _exit_with_parent(parent: int) -> None:
    """A child whose bench process was killed stops too (instead of training on, unseen)."""
    import os
    import threading

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(2.0)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def run_one(cfg: dict, queue, parent: int) -> None:
    """Child process: train, then report curves, throughput and peak memory through ``queue``."""
    from ppo_training.training import train

    _exit_with_parent(parent)

    t0 = time.time()
    wall: list[float] = []

    def on_event(event: str, payload: dict) -> None:
        if event == "validation":
            wall.append(time.time() - t0)

    try:
        result = train(cfg, callbacks=[on_event])
        st = result.stats
        sps = st.get("charts/env_steps_per_second", [])
        queue.put({
            "ok": True, "val_cost": st.get("validation/cost_mean", []), "val_step": st.get("validation/cost_mean/step", []),
            "val_wall_s": wall, "references": result.references, "best_val": result.best_val_cost,
            "global_step": result.global_step, "stopped": result.stopped_because,
            "env_steps_per_s": float(sorted(sps)[len(sps) // 2]) if sps else float("nan"),
            "train_wall_s": time.time() - t0, "best_model": str(result.best_model or result.final_model),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        })
    except Exception as exc:  # reported in the table; the other configurations still run
        queue.put({"ok": False, "error": f"{type(exc).__name__}: {exc}"})


def references_of(results: list[dict]) -> dict:
    """The teacher's and PID's validation costs, from the first configuration that ran."""
    return next((r["references"] for r in results if r.get("ok") and r["references"]), {})


def plot(results: list[dict], path: Path, budget_min: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5.5))
    refs = references_of(results)
    # A configuration far worse than the teacher would squash the others: the scale stops at
    # 1.5x the teacher and such curves are marked as leaving it.
    cap = 1.5 * refs["teacher"] if "teacher" in refs else float("inf")
    lo, hi = [], []
    for r in results:
        if not r.get("ok") or not r["val_cost"]:
            continue
        minutes = [w / 60 for w in r["val_wall_s"]]
        off = max(r["val_cost"]) > cap
        ax.plot(minutes, r["val_cost"], marker="o", ms=3, label=r["label"] + (" (leaves the scale)" if off else ""))
        lo.append(min(r["val_cost"]))
        hi.append(min(max(r["val_cost"]), cap))
    if "teacher" in refs:
        t = refs["teacher"]
        ax.axhline(t, color="k", ls="--", lw=1, label=f"teacher {t:.2f}")
        ax.axhline(0.93 * t, color="g", ls=":", lw=1, label=f"0.93 x teacher {0.93 * t:.2f}")
        lo.append(0.93 * t)
        hi.append(t)
    if "pid" in refs:
        p = refs["pid"]
        if p > cap or (hi and p > 2 * max(hi)):  # off the scale of interest: stated, not drawn
            ax.text(0.99, 0.98, f"PID {p:.1f} (off scale)", transform=ax.transAxes, ha="right", va="top")
        else:
            ax.axhline(p, color="r", ls="--", lw=1, label=f"PID {p:.2f}")
            hi.append(p)
    if lo and hi:
        span = max(hi) - min(lo)
        ax.set_ylim(min(lo) - 0.1 * span, max(hi) + 0.1 * span)
    ax.set_xlim(0, budget_min * 1.02)
    ax.set_xlabel("training wall time (min)")
    ax.set_ylabel("validation mean total_cost (lower is better)")
    ax.set_title("PPO validation cost vs its teacher and PID (real validation segments)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_results(out: Path, args: argparse.Namespace, results: list[dict]) -> None:
    """results.json and curves.png of the configurations finished so far (each file replaced atomically)."""
    refs = references_of(results)
    summary = {"budget_min": args.budget_min, "seed": args.seed, "references": refs, "results": results}
    tmp = out / "results.json.tmp"
    tmp.write_text(json.dumps(summary, indent=2))
    os.replace(tmp, out / "results.json")
    plot(results, out / "curves.tmp.png", args.budget_min)
    os.replace(out / "curves.tmp.png", out / "curves.png")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--budget-min", type=float, required=True, help="training wall time per configuration")
    p.add_argument("--steps", type=int, default=None,
                   help="also stop each configuration after this many transitions (compare at equal samples)")
    p.add_argument("--set", action="append", default=[], dest="groups", metavar="'KEY=VALUE ...'",
                   help="one configuration of the ablation (repeatable)")
    p.add_argument("--no-default", action="store_true", help="run only the --set configurations")
    p.add_argument("--config", default=None, help="base config (default: config.yaml)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--name", default=None, help="output folder under runs/ppo_learning/ (default: date-time)")
    args = p.parse_args(argv)

    try:
        groups = ([{}] if not args.no_default else []) + [parse_group(g) for g in args.groups]
        if not groups:
            raise ValueError("nothing to run: --no-default needs at least one --set")
        base = load_config(args.config)
        for g in groups:
            load_config(args.config, g)  # unknown keys fail here, before any training
    except (ValueError, KeyError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    name = args.name or time.strftime("%Y%m%d_%H%M%S")
    out = ROOT / "runs" / "ppo_learning" / name
    out.mkdir(parents=True, exist_ok=True)
    data_path = Path(base["data"]["path"])
    results = []
    ctx = mp.get_context("spawn")
    for k, g in enumerate(groups):
        cfg = load_config(args.config, g)
        cfg["seed"] = args.seed
        cfg["run_name"] = f"{name}_{k}"
        cfg["runs_dir"] = str(ROOT / "runs" / "ppo_learning" / name / "runs")
        cfg["data"]["path"] = str(data_path if data_path.is_absolute() else ROOT / data_path)
        cfg["train"]["time_budget_s"] = args.budget_min * 60
        # The budget decides (or --steps, for comparisons at equal samples on a busy machine).
        cfg["train"]["total_timesteps"] = args.steps or 10**12
        cfg["train"]["patience"] = None
        cfg["logging"]["progress"] = False
        label = label_of(g)
        print(f"[{k + 1}/{len(groups)}] {label}: training for {args.budget_min:g} min", flush=True)
        queue = ctx.Queue()
        proc = ctx.Process(target=run_one, args=(cfg, queue, os.getpid()), daemon=True)
        proc.start()
        try:
            res = queue.get()
        finally:
            if proc.is_alive():
                proc.join(timeout=60)
            if proc.is_alive():
                proc.terminate()
        res.update(label=label, overrides=g)
        results.append(res)
        if res["ok"]:
            t = res["references"].get("teacher", float("nan"))
            print(f"    best validation {res['best_val']:.3f} (teacher {t:.3f}, ratio {res['best_val'] / t:.3f}), "
                  f"{res['global_step']:,} transitions, {res['env_steps_per_s']:,.0f} env-steps/s", flush=True)
        else:
            print(f"    failed: {res['error']}", flush=True)
        # after each configuration, so a long ablation that is stopped keeps what it finished
        write_results(out, args, results)

    refs = references_of(results)
    teacher, pid = refs.get("teacher", float("nan")), refs.get("pid", float("nan"))
    print(f"\nPPO learning, {args.budget_min:g} min per configuration, seed {args.seed}; validation on "
          f"{len(results[0].get('val_cost', [])) and 'real'} validation segments")
    head = f"{'configuration':<52}{'start':>9}{'final':>9}{'best':>9}{'/teacher':>10}{'final/t':>9}{'/PID':>8}{'steps':>12}{'steps/s':>9}{'peak MB':>9}"
    print(head)
    print("-" * len(head))
    print(f"{'teacher (PID + feedforward)':<52}{'':>9}{teacher:>9.3f}{'':>9}{1.0:>10.3f}{1.0:>9.3f}{teacher / pid:>8.3f}")
    print(f"{'PID':<52}{'':>9}{pid:>9.3f}{'':>9}{pid / teacher:>10.3f}{pid / teacher:>9.3f}{1.0:>8.3f}")
    for r in results:
        if not r["ok"]:
            print(f"{r['label'][:51]:<52}  failed: {r['error']}")
            continue
        v = r["val_cost"]
        print(f"{r['label'][:51]:<52}{v[0]:>9.3f}{v[-1]:>9.3f}{r['best_val']:>9.3f}{r['best_val'] / teacher:>10.3f}"
              f"{v[-1] / teacher:>9.3f}{r['best_val'] / pid:>8.3f}{r['global_step']:>12,}{r['env_steps_per_s']:>9,.0f}{r['peak_rss_mb']:>9.0f}")
    print(f"\nresults: {out / 'results.json'}\nplot:    {out / 'curves.png'}")
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
