"""Load segment CSVs into the simulator's columns, select and split file lists.

A segment CSV has the header ``t,vEgo,aEgo,roll,targetLateralAcceleration,steerCommand`` and
599 or 600 rows at 10 Hz; ``steerCommand`` is logged only for the first 100 rows.  The simulator
columns (SPEC.md) are derived exactly as the official harness derives them (pandas parsing, then
``sin(roll) * 9.81`` and a sign flip of the logged steer), so the float64 values are bit-identical.

The random seed of a rollout depends on the *path string* of the file, not on its content:
:func:`list_segment_files` builds path strings the way the official harness does
(``str(path)`` of the entries of ``Path(data_path).iterdir()``), so running from the folder that
holds ``data/`` with ``data_path="data"`` reproduces the official seeds.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from .. import PROJECT_ROOT
from ..constants import ACC_G, CONTROL_START_IDX, MIN_SEGMENT_ROWS

#: Columns a segment CSV must have (``t`` is informative only).
REQUIRED_COLUMNS = ("vEgo", "aEgo", "roll", "targetLateralAcceleration", "steerCommand")

#: The official score is the mean over the first 5,000 files (``00000.csv`` .. ``04999.csv``).
OFFICIAL_EVAL_COUNT = 5000

#: A folder holding generated data carries this manifest; everything reading it reports "synthetic".
SYNTHETIC_MANIFEST = "synthetic_manifest.json"


class SegmentError(ValueError):
    """A segment file that cannot be used; the message names the file and the problem."""


def segment_seed(path: str) -> int:
    """Seed of the official harness for a segment path string: ``int(md5(path)) % 10**4``."""
    return int(hashlib.md5(path.encode()).hexdigest(), 16) % 10**4


@dataclass(frozen=True)
class Segment:
    """One driving segment in simulator columns (all float64 arrays of length ``n_rows``).

    Attributes:
        path: the path string used for the seed (see :func:`segment_seed`).
        roll_lataccel: lateral acceleration from road roll, m/s^2 (``sin(roll) * 9.81``).
        v_ego: speed, m/s.
        a_ego: forward acceleration, m/s^2.
        target_lataccel: target lateral acceleration, m/s^2.
        steer_command: logged steer, right-positive; NaN after row 100 where the log is empty.
    """

    path: str
    roll_lataccel: np.ndarray
    v_ego: np.ndarray
    a_ego: np.ndarray
    target_lataccel: np.ndarray
    steer_command: np.ndarray

    @property
    def n_rows(self) -> int:
        return len(self.target_lataccel)

    @property
    def seed(self) -> int:
        # the official harness seeds with str(Path(p)): "./data/00000.csv" is "data/00000.csv" there
        return segment_seed(str(Path(self.path)))


def _numeric_column(df: pd.DataFrame, column: str, path: str, allow_nan_from: int | None) -> np.ndarray:
    raw = df[column]
    values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64)
    bad = np.isnan(values) & raw.notna().to_numpy()
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise SegmentError(
            f"{path}: column {column!r} has a non-numeric value {raw.iloc[row]!r} at data row {row + 1}"
        )
    check = values if allow_nan_from is None else values[:allow_nan_from]
    if not np.isfinite(check).all():
        row = int(np.flatnonzero(~np.isfinite(check))[0])
        what = "an empty" if np.isnan(check[row]) else "a non-finite"
        raise SegmentError(f"{path}: column {column!r} has {what} value at data row {row + 1}")
    return values


def load_segment(path: str | Path) -> Segment:
    """Read one segment CSV.

    Args:
        path: file path; ``str(path)`` becomes :attr:`Segment.path` and decides the seed.

    Raises:
        SegmentError: unreadable file, missing column, non-numeric or missing value, or fewer
            than 500 rows (the cost window is steps 100-499).
    """
    path_str = str(path)
    try:
        # pandas with default options, as the official harness parses, so floats are bit-identical.
        df = pd.read_csv(path_str)
    except FileNotFoundError:
        raise SegmentError(f"{path_str}: no such file") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise SegmentError(f"{path_str}: not a readable CSV ({exc})") from None
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise SegmentError(
            f"{path_str}: missing column(s) {', '.join(missing)}; expected header "
            f"t,vEgo,aEgo,roll,targetLateralAcceleration,steerCommand"
        )
    if len(df) < MIN_SEGMENT_ROWS:
        raise SegmentError(
            f"{path_str}: {len(df)} rows, but at least {MIN_SEGMENT_ROWS} are needed to cover the "
            f"cost window (steps {CONTROL_START_IDX}-{MIN_SEGMENT_ROWS - 1})"
        )
    roll = _numeric_column(df, "roll", path_str, None)
    v_ego = _numeric_column(df, "vEgo", path_str, None)
    a_ego = _numeric_column(df, "aEgo", path_str, None)
    target = _numeric_column(df, "targetLateralAcceleration", path_str, None)
    # The steer log is empty after the warm-up; only the first CONTROL_START_IDX rows are used.
    steer = _numeric_column(df, "steerCommand", path_str, CONTROL_START_IDX)
    return Segment(
        path=path_str,
        roll_lataccel=np.sin(roll) * ACC_G,
        v_ego=v_ego,
        a_ego=a_ego,
        target_lataccel=target,
        steer_command=-steer,
    )


def load_segments(paths: Iterable[str | Path], progress: bool = False) -> list[Segment]:
    """Load many segment files (in the given order), optionally with a progress bar."""
    paths = list(paths)
    if progress and len(paths) > 50:
        from ..utils.progress import track

        return [load_segment(p) for p in track(paths, desc="loading segments", unit="file", leave=False)]
    return [load_segment(p) for p in paths]


def list_segment_files(data_path: str | Path, num_segs: int | None = None) -> list[str]:
    """Segment files like the official harness selects them: sorted, first ``num_segs``.

    Args:
        data_path: a CSV file or a folder of CSV files.  Path strings are ``str(Path(data_path) /
            name)``, so ``"./data"`` and ``"data"`` both give ``data/00000.csv`` as upstream does.
        num_segs: keep only the first N sorted files (all when None).

    Only ``*.csv`` entries are taken (a checksum or manifest file beside them is skipped).
    """
    root = Path(data_path)
    if root.is_file():
        return [str(root)]
    if not root.is_dir():
        raise FileNotFoundError(f"{data_path}: no such file or folder of segment CSVs; {fill_command(data_path)}")
    files = sorted(p for p in root.iterdir() if p.suffix == ".csv" and p.is_file())
    if not files:
        raise FileNotFoundError(f"{data_path}: folder holds no .csv segment files; {fill_command(data_path)}")
    if num_segs is not None:
        if num_segs < 1:
            raise ValueError(f"num_segs must be at least 1, got {num_segs}")
        files = files[:num_segs]
    return [str(p) for p in files]


def fill_command(data_path: str | Path, project_root: str | Path | None = None) -> str:
    """The one command that fills a missing or empty segment folder, as advice for an error message.

    A folder named like ``*synth*`` (or marked synthetic) is generated; any other folder gets the
    real segments, which ``assets fetch`` writes to ``<dest>/data`` (dest: the project by default).
    """
    p = Path(data_path)
    if "synth" in p.name.lower() or is_synthetic_dir(p):
        return f"generate it with `python -m ppo_training.data.synth --n 2000 --out {data_path} --seed 0`"
    project_root = Path(PROJECT_ROOT if project_root is None else project_root)
    if p.name == "data":
        if p.parent.resolve() == project_root.resolve():
            return "fetch the segments with `python -m ppo_training.assets fetch` (`make assets` in the checkout)"
        return f"fetch the segments with `python -m ppo_training.assets fetch --dest {p.parent}`"
    return (f"fetch the segments with `python -m ppo_training.assets fetch` (into {project_root / 'data'}) "
            f"and point data.path / --data_path there")


def _unit_hash(name: str) -> float:
    """A stable number in [0, 1) from a file name (independent of folder and of other files)."""
    return int(hashlib.sha256(name.encode()).hexdigest()[:12], 16) / float(16**12)


def is_official_eval_file(path: str | Path) -> bool:
    """True for a file of the official evaluation set: upstream names ``00000.csv`` .. ``04999.csv``.

    Reserved by name, not by position: a partial copy of the data set sorts differently, but a
    file keeps its name.
    """
    stem = Path(path).stem
    return stem.isdigit() and int(stem) < OFFICIAL_EVAL_COUNT


def split_files(
    files: Sequence[str],
    *,
    reserve_official: bool = True,
    val_fraction: float = 0.05,
    test_fraction: float = 0.0,
) -> dict[str, list[str]]:
    """Split a file list deterministically into ``train``, ``val`` and ``test`` lists.

    With ``reserve_official`` the official evaluation files (:func:`is_official_eval_file`) all go
    to ``test``: training and validation must never see them.  Every other file is assigned by a
    hash of its file name (not of its position), so a file keeps its split when the data set
    grows: ``val`` with probability ``val_fraction``, ``test`` with ``test_fraction``, otherwise
    ``train``.  Each list is sorted by file name.
    """
    if not 0 <= val_fraction < 1 or not 0 <= test_fraction < 1 or val_fraction + test_fraction >= 1:
        raise ValueError(
            f"val_fraction={val_fraction} and test_fraction={test_fraction} must be in [0, 1) "
            f"and sum to less than 1"
        )
    ordered = sorted(files, key=lambda f: Path(f).name)
    split: dict[str, list[str]] = {"train": [], "val": [], "test": []}
    for f in ordered:
        if reserve_official and is_official_eval_file(f):
            split["test"].append(f)
            continue
        u = _unit_hash(Path(f).name)
        key = "val" if u < val_fraction else "test" if u < val_fraction + test_fraction else "train"
        split[key].append(f)
    return split


def file_identity(path: str | Path) -> str:
    """``name:size`` of a segment file: the same upstream file in another folder has the same identity."""
    p = Path(path)
    return f"{p.name}:{p.stat().st_size}"


def is_synthetic_dir(data_path: str | Path) -> bool:
    """True when ``data_path`` (a folder, or a file inside one) holds generated segments."""
    p = Path(data_path)
    folder = p if p.is_dir() else p.parent
    return (folder / SYNTHETIC_MANIFEST).is_file()


def read_synthetic_manifest(data_path: str | Path) -> dict | None:
    """The generator's manifest of a synthetic folder, or None for real data."""
    p = Path(data_path)
    folder = p if p.is_dir() else p.parent
    f = folder / SYNTHETIC_MANIFEST
    return json.loads(f.read_text()) if f.is_file() else None
