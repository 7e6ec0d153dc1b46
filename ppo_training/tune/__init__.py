"""Hyper-parameter sweeps (Optuna) and multi-seed comparisons of training runs.

* :mod:`.space`: search-space files (dotted config keys, float / log-float / int / categorical);
* :mod:`.study`: storage with heartbeats, sampler, pruner, the objective, a worker (:func:`run_sweep`);
* :mod:`.seeds`: one config over seeds, bootstrap confidence intervals, comparisons, figures;
* ``python -m ppo_training.tune``: the command line (``--help``).
"""
from .seeds import compare, compare_table, load_summary, run_seeds, seeds_figure, summarize
from .space import SearchSpace, SpaceError, apply_params
from .study import DEFAULT_STORAGE, SweepSettings, open_study, run_sweep, summary_lines

__all__ = [
    "DEFAULT_STORAGE",
    "SearchSpace",
    "SpaceError",
    "SweepSettings",
    "apply_params",
    "compare",
    "compare_table",
    "load_summary",
    "open_study",
    "run_seeds",
    "run_sweep",
    "seeds_figure",
    "summarize",
    "summary_lines",
]
