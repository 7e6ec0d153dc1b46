"""One training run scored for a sweep or a seed study: the training loop plus its validation curve."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..training import TrainResult, train


@dataclass
class RunOutcome:
    """What a sweep or a seed study keeps of a training run.

    Attributes:
        value: the best validation cost of the run (lower is better).
        curve: ``[(global_step, validation cost), ...]`` in the order validated.
        result: the training loop's result (run folder, checkpoints, steps, stop reason).
        best_checkpoint: ``best.pt``, or ``final_model.pt`` when the run never validated.
    """

    value: float
    curve: list[tuple[int, float]] = field(default_factory=list)
    result: TrainResult | None = None
    best_checkpoint: Path | None = None


def train_and_score(cfg: dict, *, on_validation: Callable[[int, float], None] | None = None,
                    should_stop: Callable[[], bool] | None = None) -> RunOutcome:
    """Train ``cfg`` and return its best validation cost and curve.

    ``on_validation(global_step, cost)`` is called after each validation (a sweep reports to its
    pruner there); ``should_stop`` is the training loop's own stop poll.  A run that ends before
    its first validation (a short time budget) has its final model validated once, on the same
    files with the same exact backend, so every run has a value.
    """
    curve: list[tuple[int, float]] = []

    def on_event(event: str, payload: dict) -> None:
        if event == "validation":
            step, cost = int(payload["global_step"]), float(payload["val_cost"])
            curve.append((step, cost))
            if on_validation is not None:
                on_validation(step, cost)

    result = train(cfg, callbacks=[on_event], should_stop=should_stop)
    value, best = result.best_val_cost, result.best_model
    if not curve or not math.isfinite(value):
        value = validate_checkpoint(result.final_model, cfg.get("tinyphysics_model"))
        curve.append((result.global_step, value))
        best = result.final_model
    return RunOutcome(float(value), curve, result, best)


def validate_checkpoint(path: str | Path, model_path: str | Path | None = None) -> float:
    """Mean validation cost of a checkpoint on its own run's validation files (exact CPU backend)."""
    from ..controllers.policy import PolicyController
    from ..evaluation import evaluate
    from ..sim.backends import make_backend

    ctrl = PolicyController.from_checkpoint(path)
    files = ctrl.checkpoint["files"]["val"]
    res = evaluate(ctrl, files, backend=make_backend("onnx", model_path), progress=False)
    return float(res.table["total_cost"].mean())
