"""The official score of a rollout over the cost window (steps 100-499)."""
from __future__ import annotations

import numpy as np

from ..constants import CONTROL_START_IDX, COST_END_IDX, DEL_T, LAT_ACCEL_COST_MULTIPLIER


def compute_costs(target_history: np.ndarray, current_history: np.ndarray) -> dict[str, np.ndarray]:
    """Costs of one or many rollouts.

    Args:
        target_history: float64 ``[T]`` or ``[B, T]`` target lateral acceleration per step, T >= 500.
        current_history: float64, same shape, the simulated lateral acceleration per step.

    Returns:
        ``lataccel_cost``, ``jerk_cost`` and ``total_cost`` (float64 scalars or ``[B]`` arrays):
        ``lataccel = mean((target - pred)^2) * 100``, ``jerk = mean((diff(pred) / 0.1)^2) * 100``,
        ``total = 50 * lataccel + jerk`` over steps 100..499.

    Each row is reduced on its own 1-D array, exactly as the official harness does, so the results
    are bit-identical to it (numpy's pairwise summation depends on the array layout).
    """
    target = np.asarray(target_history, dtype=np.float64)
    pred = np.asarray(current_history, dtype=np.float64)
    if target.shape != pred.shape:
        raise ValueError(f"target shape {target.shape} != current shape {pred.shape}")
    if target.shape[-1] < COST_END_IDX:
        raise ValueError(f"histories have {target.shape[-1]} steps; the cost window needs {COST_END_IDX}")
    single = target.ndim == 1
    target2 = target.reshape(-1, target.shape[-1])
    pred2 = pred.reshape(-1, pred.shape[-1])
    out = {k: np.empty(len(target2)) for k in ("lataccel_cost", "jerk_cost", "total_cost")}
    for b in range(len(target2)):
        t = np.array(target2[b, CONTROL_START_IDX:COST_END_IDX])
        p = np.array(pred2[b, CONTROL_START_IDX:COST_END_IDX])
        lat = np.mean((t - p) ** 2) * 100
        jerk = np.mean((np.diff(p) / DEL_T) ** 2) * 100
        out["lataccel_cost"][b] = lat
        out["jerk_cost"][b] = jerk
        out["total_cost"][b] = lat * LAT_ACCEL_COST_MULTIPLIER + jerk
    if single:
        return {k: v[0] for k, v in out.items()}
    return out
