"""Atomic checkpoint files, safe loading, and their discovery.

A checkpoint holds tensors and plain Python values only (dicts, lists, tuples, str, int, float,
bool, None), so it is read with ``torch.load(weights_only=True)``: loading a file never runs code
from it.  A file that needs pickled objects (a class, a function, a numpy array) is refused with a
:class:`CheckpointError`.  An older checkpoint of this project that holds such objects can be
rewritten once, by someone who trusts it::

    python -m ppo_training.utils.checkpoint convert OLD.pt NEW.pt

torch is imported where a checkpoint is read or written, so that importing
:class:`CheckpointError` (the CLI does) stays cheap.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys
import tempfile
from collections import OrderedDict
from pathlib import Path, PurePath
from typing import Any

CHECKPOINT_RE = re.compile(r"checkpoint_(\d+)\.pt$")
FORMAT = "ppo_training.checkpoint/1"
CONVERT_COMMAND = "python -m ppo_training.utils.checkpoint convert"

_PLAIN = (str, int, float, bool, type(None))


class CheckpointError(ValueError):
    """A file that is not a usable checkpoint; the message names it and says why."""


def to_safe(obj: Any, where: str = "checkpoint") -> Any:
    """``obj`` with every value turned into something ``torch.load(weights_only=True)`` accepts.

    Tensors and plain values are kept; numpy scalars become Python numbers, numpy arrays become
    tensors, paths become strings, sets become sorted lists, dataclasses become dicts.

    Raises:
        CheckpointError: a value of another type; the message names its place (``where``).
    """
    import numpy as np
    import torch

    if type(obj) in _PLAIN or isinstance(obj, (torch.Tensor, torch.dtype, torch.Size)):
        return obj
    if isinstance(obj, np.generic):
        return to_safe(obj.item(), where)
    for plain in (bool, int, float, str):  # subclasses (an IntEnum, a str subclass) pickle by class
        if isinstance(obj, plain):
            return plain(obj)
    if isinstance(obj, np.ndarray):
        if obj.dtype == object:
            return to_safe(obj.tolist(), where)
        return torch.from_numpy(np.ascontiguousarray(obj).copy())
    if isinstance(obj, PurePath):
        return str(obj)
    if isinstance(obj, torch.device):
        return str(obj)
    if isinstance(obj, dict):
        # OrderedDict (a state_dict) is kept as such: weights_only accepts it.
        items = [(to_safe(k, f"{where} key"), to_safe(v, f"{where}[{k!r}]")) for k, v in obj.items()]
        return OrderedDict(items) if isinstance(obj, OrderedDict) else dict(items)
    if isinstance(obj, list):
        return [to_safe(v, f"{where}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, tuple):
        return tuple(to_safe(v, f"{where}[{i}]") for i, v in enumerate(obj))
    if isinstance(obj, (set, frozenset)):
        return sorted(to_safe(v, f"{where} item") for v in obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_safe(getattr(obj, f.name), f"{where}.{f.name}") for f in dataclasses.fields(obj)}
    raise CheckpointError(
        f"{where}: a {type(obj).__module__}.{type(obj).__qualname__} cannot be stored in a checkpoint "
        f"(expected tensors, numpy values or plain dict/list/str/int/float/bool/None)"
    )


def save_atomic(obj: Any, path: str | Path) -> Path:
    """``torch.save`` of :func:`to_safe` ``(obj)`` to a temp file in the same folder, fsync, rename.

    Whatever this writes loads back with ``weights_only=True``.
    """
    import torch

    path = Path(path)
    safe = to_safe(obj, path.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(safe, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _check_format(ckpt: Any, path: Path) -> dict:
    if not isinstance(ckpt, dict) or ckpt.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not a policy checkpoint of this project (expected format {FORMAT})")
    for key in ("policy", "config", "obs_dim"):
        if key not in ckpt:
            raise CheckpointError(f"{path}: checkpoint lacks {key!r}")
    return ckpt


def load_checkpoint(path: str | Path) -> dict:
    """Load a checkpoint written by the trainer without running any code from the file.

    Raises:
        CheckpointError: no such file; a file that needs pickled objects (refused before any of
            them is built; the message says how to convert a trusted one); an unreadable file; or
            a file that is not a checkpoint of this project.
    """
    import torch

    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        text = str(exc)
        unsafe = re.search(r"Unsupported global: GLOBAL (\S+)", text)
        if unsafe:
            raise CheckpointError(
                f"{path}: refused: loading it needs pickled Python objects ({unsafe.group(1)}), which "
                f"could run arbitrary code; nothing in the file was run. A checkpoint holds only "
                f"tensors and plain values. If the file is an older checkpoint from a source you "
                f"trust, rewrite it once with `{CONVERT_COMMAND} {path} NEW.pt`"
            ) from None
        reason = re.search(r"WeightsUnpickler error: (.+)", text)
        detail = reason.group(1).strip() if reason else f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"
        raise CheckpointError(f"{path}: not a readable checkpoint ({detail})") from None
    return _check_format(ckpt, path)


def evaluation_weights(ckpt: dict) -> dict:
    """The policy weights that validation evaluated and evaluation loads: the averaged ones of a run
    with ``train.policy_ema``, else the trained ones."""
    return ckpt.get("eval_policy") or ckpt["policy"]


def convert_checkpoint(old: str | Path, new: str | Path) -> Path:
    """Rewrite a trusted older checkpoint in the safe format (tensors and plain values only).

    This is the one place that reads a file with full unpickling (``weights_only=False``), which
    runs whatever code the file holds: call it only on files you trust.  The result is checked by
    loading it back with :func:`load_checkpoint`.
    """
    import torch

    old, new = Path(old), Path(new)
    if not old.is_file():
        raise CheckpointError(f"{old}: no such checkpoint file")
    try:
        ckpt = torch.load(old, map_location="cpu", weights_only=False)
    except Exception as exc:
        raise CheckpointError(f"{old}: not a readable checkpoint ({type(exc).__name__}: {exc})") from None
    save_atomic(_check_format(ckpt, old), new)
    load_checkpoint(new)
    return new


def latest_checkpoint(folder: str | Path) -> Path | None:
    """The periodic checkpoint with the highest step in ``folder`` (None when there is none)."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := CHECKPOINT_RE.search(p.name))]
    return max(found)[1] if found else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m ppo_training.utils.checkpoint",
        description="Check a checkpoint, or rewrite a trusted older one so that it loads without running code.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("convert", help="rewrite OLD (fully unpickled: trusted files only) as NEW in the safe format")
    c.add_argument("old", help="checkpoint to convert; it is loaded with full unpickling, so trust it")
    c.add_argument("new", help="where to write the converted checkpoint (may equal OLD)")
    k = sub.add_parser("check", help="load a checkpoint the safe way and print what it holds")
    k.add_argument("path")
    args = p.parse_args(argv)
    try:
        if args.command == "convert":
            out = convert_checkpoint(args.old, args.new)
            print(f"converted {args.old} -> {out} (loads with weights_only=True)")
        else:
            ckpt = load_checkpoint(args.path)
            print(f"{args.path}: {FORMAT}, step {ckpt.get('global_step')}, update {ckpt.get('update')}, "
                  f"keys: {', '.join(sorted(ckpt))}")
    except (CheckpointError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
