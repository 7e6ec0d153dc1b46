"""Distributions of the simulator inputs over a set of segments (real vs synthetic comparisons)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..constants import DEL_T
from .segments import load_segments

QUANTITIES = ("speed", "|target|", "|target rate|", "roll_lataccel")


def segment_values(files: list[str]) -> list[dict[str, np.ndarray]]:
    """Per-segment values of the compared quantities: speed (m/s), |target| (m/s^2), |target rate|
    (per-step difference / 0.1 s, m/s^3) and roll_lataccel (m/s^2, signed)."""
    out = []
    for s in load_segments(files, progress=True):
        out.append({
            "speed": s.v_ego,
            "|target|": np.abs(s.target_lataccel),
            "|target rate|": np.abs(np.diff(s.target_lataccel) / DEL_T),
            "roll_lataccel": s.roll_lataccel,
        })
    return out


def summary(per_segment: list[dict[str, np.ndarray]], q: str) -> np.ndarray:
    """mean, p10, p90 of quantity ``q`` pooled over all rows of the given segments."""
    x = np.concatenate([seg[q] for seg in per_segment])
    return np.array([x.mean(), np.percentile(x, 10), np.percentile(x, 90)])


def distribution_table(sets: dict[str, list[str]]) -> pd.DataFrame:
    """``set name -> files`` to a table of mean / p10 / p90 per quantity and set."""
    rows = []
    for name, files in sets.items():
        values = segment_values(files)
        for q in QUANTITIES:
            m, p10, p90 = summary(values, q)
            rows.append({"quantity": q, "set": name, "mean": m, "p10": p10, "p90": p90})
    return pd.DataFrame(rows)
