"""Atomic checkpoint files and their discovery.

torch is imported where a checkpoint is read or written, so that importing
:class:`CheckpointError` (the CLI does) stays cheap.
"""
from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any

CHECKPOINT_RE = re.compile(r"checkpoint_(\d+)\.pt$")
FORMAT = "ppo_training.checkpoint/1"


class CheckpointError(ValueError):
    """A file that is not a usable checkpoint; the message names it and says why."""


def save_atomic(obj: Any, path: str | Path) -> Path:
    """``torch.save`` to a temp file in the same folder, fsync, then rename over ``path``."""
    import torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load_checkpoint(path: str | Path) -> dict:
    """Load a checkpoint written by the trainer, with clear errors for anything else."""
    import torch

    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:
        raise CheckpointError(f"{path}: not a readable checkpoint ({type(exc).__name__}: {exc})") from None
    if not isinstance(ckpt, dict) or ckpt.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not a policy checkpoint of this project (expected format {FORMAT})")
    for key in ("policy", "config", "obs_dim"):
        if key not in ckpt:
            raise CheckpointError(f"{path}: checkpoint lacks {key!r}")
    return ckpt


def latest_checkpoint(folder: str | Path) -> Path | None:
    """The periodic checkpoint with the highest step in ``folder`` (None when there is none)."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := CHECKPOINT_RE.search(p.name))]
    return max(found)[1] if found else None
