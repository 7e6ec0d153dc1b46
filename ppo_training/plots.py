"""Matplotlib figures shared by the notebooks, the training dashboard and the HTML report."""
from __future__ import annotations

from typing import Mapping

import numpy as np

from .constants import CONTROL_START_IDX, COST_END_IDX
from .evaluation import COST_COLUMNS


def rollout_figure(target: np.ndarray, runs: Mapping[str, Mapping[str, np.ndarray]], title: str = "",
                   fig=None):
    """Target vs simulated lateral acceleration (top) and steer (bottom) of one segment.

    Args:
        target: float ``[T]`` target lateral acceleration.
        runs: ``controller name -> {"current": [T], "action": [T]}``.
        fig: a figure to draw into (cleared), or None for a new one.
    """
    import matplotlib.pyplot as plt

    if fig is None:
        fig = plt.figure(figsize=(11, 4.8))
    fig.clear()
    a1, a2 = fig.subplots(2, 1, sharex=True)
    t = np.arange(len(target))
    a1.plot(t, target, "k", lw=1.2, label="target")
    for name, h in runs.items():
        a1.plot(np.arange(len(h["current"])), h["current"], lw=1, label=name)
        a2.plot(np.arange(len(h["action"])), h["action"], lw=1, label=name)
    for ax in (a1, a2):
        ax.axvspan(CONTROL_START_IDX, COST_END_IDX, color="0.92", zorder=0)
    a1.set_ylabel("lateral accel (m/s²)")
    a2.set_ylabel("steer")
    a2.set_xlabel("step (10 Hz); shaded: scored steps 100-499")
    a1.set_title(title)
    a1.legend(loc="upper right", fontsize=8)
    return fig


def cost_histogram_figure(tables: Mapping[str, "object"]):
    """Histograms of lataccel / jerk / total cost per segment for several controllers."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.4))
    for ax, col in zip(axes, COST_COLUMNS):
        values = {name: np.asarray(t[col]) for name, t in tables.items()}
        hi = max(float(np.percentile(v, 99)) for v in values.values()) or 1.0
        bins = np.linspace(0, hi, 30)
        for name, v in values.items():
            ax.hist(np.clip(v, 0, hi), bins=bins, alpha=0.6, label=name)
        ax.set_title(col)
        ax.set_xlabel("cost per segment")
        ax.legend()
    fig.tight_layout()
    return fig


def training_figure(stats: Mapping[str, list], rollout: tuple | None = None, fig=None):
    """Training dashboard: costs, losses, KL / entropy, and a sample rollout.

    Args:
        stats: the trainer's ``name -> values`` with ``name/step`` companions (``TrainResult.stats``).
        rollout: optional ``(title, target, {name: histories})`` for the fourth panel.
    """
    import matplotlib.pyplot as plt

    if fig is None:
        fig = plt.figure(figsize=(12, 7))
    fig.clear()
    axes = fig.subplots(2, 2)

    def curve(ax, name, label=None, **kw):
        if stats.get(name):
            kw.setdefault("marker", ".")
            ax.plot(stats[name + "/step"], stats[name], label=label or name.split("/")[-1], **kw)

    ax = axes[0, 0]
    curve(ax, "episode/cost_mean", "episode cost (stochastic)")
    curve(ax, "episode/cost_median", "episode cost median", alpha=0.6)
    curve(ax, "validation/cost_mean", "validation cost (deterministic)", marker="o")
    # Reference lines: the teacher the policy was cloned from and PID, on the same validation files.
    for name, style in (("teacher", dict(color="k", ls="--")), ("pid", dict(color="r", ls=":"))):
        values = stats.get(f"validation/{name}_cost")
        if values:
            ax.axhline(values[-1], lw=1, label=f"{name} (validation) {values[-1]:.2f}", **style)
    ax.set_yscale("log")
    ax.set_title("cost")
    ax.set_xlabel("env steps")
    ax.legend(fontsize=8)
    ax = axes[0, 1]
    curve(ax, "losses/policy_loss")
    curve(ax, "losses/value_loss")
    ax.set_title("losses")
    ax.legend(fontsize=8)
    ax = axes[1, 0]
    curve(ax, "losses/approx_kl")
    curve(ax, "losses/clip_frac")
    curve(ax, "losses/entropy")
    ax.set_title("KL, clip fraction, entropy")
    ax.legend(fontsize=8)
    ax = axes[1, 1]
    if rollout is not None:
        title, target, runs = rollout
        ax.plot(target, "k", lw=1.2, label="target")
        for name, h in runs.items():
            ax.plot(h["current"], lw=1, label=name)
        ax.axvspan(CONTROL_START_IDX, COST_END_IDX, color="0.92", zorder=0)
        ax.set_title(f"sample rollout: {title}")
        ax.legend(fontsize=8)
    else:
        ax.set_title("sample rollout (after the first validation)")
    fig.tight_layout()
    return fig
