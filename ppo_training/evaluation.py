"""Batched evaluation of a controller on segment files: per-segment official costs."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from .constants import CONTEXT_LENGTH, COST_END_IDX
from .controllers import BatchedController, make_controller
from .data.segments import file_identity, load_segments
from .sim.backends import ModelBackend, make_backend
from .sim.engine import BatchedSimulator
from .utils.progress import progress as progress_bar

COST_COLUMNS = ("lataccel_cost", "jerk_cost", "total_cost")


@dataclass
class EvaluationResult:
    """Per-segment costs and, when asked for, histories for plots.

    Attributes:
        table: one row per segment: ``segment`` (the path string of its seed), ``lataccel_cost``,
            ``jerk_cost``, ``total_cost``; in the order of the given files.
        histories: ``segment -> {"target", "current", "action"}`` float64 arrays (only with
            ``keep_histories``).
    """

    table: pd.DataFrame
    histories: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)

    def summary(self) -> dict[str, float]:
        """Mean of each cost over the segments."""
        return {c: float(self.table[c].mean()) for c in COST_COLUMNS}


def evaluate(
    controller: BatchedController,
    files: Sequence[str | Path],
    *,
    backend: ModelBackend,
    batch_size: int = 256,
    full: bool = False,
    keep_histories: bool = False,
    progress: bool = True,
    desc: str | None = None,
) -> EvaluationResult:
    """Roll ``controller`` out on ``files`` in batches and collect the official costs.

    Args:
        controller: a batched controller (reset for each batch).
        files: segment paths; each path string is the seed key, as in the official harness.
        backend: model backend (e.g. :class:`~ppo_training.sim.backends.OnnxBackend`).
        batch_size: segments per model call; results do not depend on it.
        full: simulate every row (for plots) instead of stopping at the cost window's end.
        keep_histories: keep target / current / action histories per segment.
        progress: report progress in env-steps (a bar, or plain lines in logs: ``utils.progress``).
    """
    files = [str(f) for f in files]
    if not files:
        raise ValueError("no segment files to evaluate")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    bar = None
    if progress:
        steps = (COST_END_IDX - CONTEXT_LENGTH) if not full else None
        label = desc or f"eval {getattr(controller, 'name', 'controller')}"
        bar = progress_bar(len(files) * steps if steps else None, label, unit="env-step", unit_scale=True)
    rows: list[dict] = []
    histories: dict[str, dict[str, np.ndarray]] = {}
    try:
        for start in range(0, len(files), batch_size):
            chunk = files[start : start + batch_size]
            sim = BatchedSimulator(backend, load_segments(chunk), full=full)
            update = (lambda n, k=len(chunk): bar.update(k * n)) if bar is not None else None
            res = sim.rollout(controller, progress=update, keep_histories=keep_histories)
            for b, path in enumerate(res.paths):
                rows.append({"segment": path, **{c: float(res.costs[c][b]) for c in COST_COLUMNS}})
                if keep_histories:
                    histories[path] = {"target": res.target[b], "current": res.current[b], "action": res.action[b]}
            if bar is not None:
                done = pd.DataFrame(rows)
                bar.set_postfix(total_cost=f"{done['total_cost'].mean():.2f}")
    finally:
        if bar is not None:
            bar.close()
    return EvaluationResult(pd.DataFrame(rows, columns=["segment", *COST_COLUMNS]), histories)


def evaluate_files(
    files: Sequence[str | Path],
    controller: str | BatchedController = "pid",
    *,
    model_path: str | Path | None = None,
    batch_size: int = 256,
    progress: bool = True,
) -> pd.DataFrame:
    """Convenience wrapper: per-segment costs of a named or given controller on the CPU backend."""
    ctrl = make_controller(controller) if isinstance(controller, str) else controller
    return evaluate(ctrl, files, backend=make_backend("onnx", model_path), batch_size=batch_size,
                    progress=progress).table


def write_results_csv(table: pd.DataFrame, path: str | Path) -> None:
    """Write per-segment costs atomically (temp file, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    table.to_csv(tmp, index=False)  # shortest round-trip repr: exact float64 values
    tmp.replace(path)


def training_overlap(checkpoint: dict, files: Sequence[str | Path]) -> int:
    """How many of ``files`` a checkpoint's policy was trained on.

    A file counts when its resolved path is a training path, or when its name and size equal a
    training file's (a copy of the same segment in another folder).
    """
    paths = set(checkpoint.get("files_abs", {}).get("train", []))
    ids = set(checkpoint.get("train_ids", []))
    return sum(str(Path(f).resolve()) in paths or file_identity(f) in ids for f in files)
