"""Matplotlib figures of a study: optimisation history, parameter importances, trials' curves."""
from __future__ import annotations

import warnings

import numpy as np
import optuna
from optuna.trial import TrialState


def history_figure(study: optuna.Study, ax=None):
    """Each finished trial's value (pruned ones at their last reported cost) and the best so far."""
    import matplotlib.pyplot as plt

    fig, ax = (plt.subplots(figsize=(9, 4.5)) if ax is None else (ax.figure, ax))
    trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))
    done = [(t.number, t.value) for t in trials if t.state == TrialState.COMPLETE]
    pruned = [(t.number, t.intermediate_values[t.last_step]) for t in trials
              if t.state == TrialState.PRUNED and t.last_step is not None]
    if done:
        x, y = np.asarray(done, dtype=np.float64).T
        ax.plot(x, y, "o", color="C0", label="complete")
        ax.step(x, np.minimum.accumulate(y), where="post", color="C3", label="best so far")
    if pruned:
        x, y = np.asarray(pruned, dtype=np.float64).T
        ax.plot(x, y, "x", color="0.5", label="pruned (last validation)")
    ax.set_xlabel("trial")
    ax.set_ylabel("best validation cost")
    ax.set_title(f"study {study.study_name}: optimisation history")
    ax.grid(alpha=0.3)
    if done or pruned:
        ax.legend(fontsize=8)
    return fig


def param_importances(study: optuna.Study) -> tuple[dict[str, float], str | None]:
    """Optuna's parameter importances, or ``({}, reason)`` when they cannot be computed yet."""
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if len(complete) < 2:
        return {}, f"parameter importances need at least 2 complete trials; the study has {len(complete)}"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return optuna.importance.get_param_importances(study), None
    except (RuntimeError, ValueError) as exc:  # e.g. every trial had the same value
        return {}, f"parameter importances not available: {exc}"


def importance_figure(study: optuna.Study, ax=None):
    """A bar chart of :func:`param_importances`; the figure says why when there is none."""
    import matplotlib.pyplot as plt

    importances, reason = param_importances(study)
    fig, ax = (plt.subplots(figsize=(8, 1 + 0.4 * max(1, len(importances)))) if ax is None else (ax.figure, ax))
    if importances:
        names = list(importances)[::-1]
        ax.barh(names, [importances[n] for n in names], color="C0")
        ax.set_xlabel("importance (fANOVA, normalised)")
    else:
        ax.text(0.5, 0.5, reason, ha="center", va="center", wrap=True, transform=ax.transAxes)
        ax.set_axis_off()
    ax.set_title("parameter importances")
    return fig


def trial_curves_figure(study: optuna.Study, ax=None, *, top: int | None = None):
    """Validation curves of the trials (user attr ``val_curve``); the best one drawn thick."""
    import matplotlib.pyplot as plt

    fig, ax = (plt.subplots(figsize=(9, 4.5)) if ax is None else (ax.figure, ax))
    trials = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))
              if t.user_attrs.get("val_curve")]
    trials.sort(key=lambda t: min(c for _, c in t.user_attrs["val_curve"]))
    best = trials[0].number if trials else None
    for t in trials[:top] if top else trials:
        curve = np.asarray(t.user_attrs["val_curve"], dtype=np.float64)
        pruned = t.state == TrialState.PRUNED
        ax.plot(curve[:, 0], curve[:, 1], ":" if pruned else "-", lw=2.5 if t.number == best else 1,
                alpha=1.0 if t.number == best else 0.6, label=f"#{t.number}" + (" (pruned)" if pruned else ""))
    ax.set_xlabel("environment steps")
    ax.set_ylabel("validation cost")
    ax.set_title("validation curves of the trials")
    ax.grid(alpha=0.3)
    if trials:
        ax.legend(fontsize=7, ncol=2)
    return fig
