"""Model backends: run the TinyPhysics model and draw the next token for a batch of segments.

The rollout logic lives once, in :mod:`ppo_training.sim.engine`; a backend only supplies

* where arrays live (``asarray`` / ``to_numpy`` / ``zeros``) and the few array operations whose
  spelling differs between frameworks (``clip``, ``encode``, ``decode``), and
* :meth:`ModelBackend.sample`: logits of the last position, ``softmax(logits / 0.8)`` and the
  inverse-CDF draw that ``np.random.choice(1024, p=probs)`` performs with one uniform per step.

:class:`OnnxBackend` (onnxruntime on CPU, numpy arrays) reproduces the official harness bit for bit.
A GPU backend implements the same methods on torch tensors.
"""
from __future__ import annotations

import os
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

import numpy as np

from .. import PROJECT_ROOT
from ..constants import CONTEXT_LENGTH, TEMPERATURE, VOCAB_SIZE
from . import tokenizer

Array = Any  # np.ndarray for the CPU backend, torch.Tensor for a torch backend


def default_model_path() -> Path:
    """``models/tinyphysics.onnx`` of the project checkout."""
    return PROJECT_ROOT / "models" / "tinyphysics.onnx"


def resolve_model_path(model_path: str | Path | None) -> Path:
    """The given TinyPhysics model path, or the project default; a clear error when it is missing."""
    path = Path(model_path) if model_path is not None else default_model_path()
    if not path.is_file():
        raise FileNotFoundError(
            f"TinyPhysics model not found at {path}; fetch it with `python -m ppo_training.assets "
            f"fetch` (add `--from DIR` for a local copy) or pass its path with --tinyphysics_model"
        )
    return path


class ModelBackend(ABC):
    """What the batched engine needs from a model and its array framework.

    Shapes: ``B`` segments, context ``C = 20``, vocabulary ``V = 1024``.
    """

    #: Human-readable name, e.g. ``"onnxruntime-cpu"``.
    name: str = "abstract"

    # -- arrays ---------------------------------------------------------------------------------
    def asarray(self, a: np.ndarray) -> Array:
        """Move a host array into the backend's memory (same dtype)."""
        return a

    def to_numpy(self, a: Array) -> np.ndarray:
        """Bring a backend array back to the host."""
        return np.asarray(a)

    def zeros(self, shape: tuple[int, ...], dtype: str) -> Array:
        return np.zeros(shape, dtype=dtype)

    def clip(self, x: Array, lo: Array | float, hi: Array | float) -> Array:
        return np.clip(x, lo, hi)

    def encode(self, lataccel: Array) -> Array:
        return tokenizer.encode(lataccel)

    def decode(self, tokens: Array) -> Array:
        return tokenizer.decode(tokens)

    # -- model ----------------------------------------------------------------------------------
    @abstractmethod
    def sample(self, states: Array, tokens: Array, uniforms: Array) -> Array:
        """Draw the next token of each segment.

        Args:
            states: float32 ``[B, 20, 4]`` (steer action, roll_lataccel, v_ego, a_ego).
            tokens: int64 ``[B, 20]`` tokenized past lateral accelerations.
            uniforms: float64 ``[B]`` one uniform draw per segment from its own generator.

        Returns:
            int64 ``[B]`` tokens: ``searchsorted(cdf, u, side="right")`` with
            ``cdf = cumsum(float64(softmax(logits[:, -1] / 0.8)))`` normalised by its last value.
        """


def sample_from_logits(logits: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """Exact numpy replica of the official softmax + ``np.random.choice`` for a batch.

    Args:
        logits: float32 ``[B, V]`` last-position logits.
        uniforms: float64 ``[B]``.

    Row-wise it performs the same float32 softmax and float64 cumulative sum as the harness, so
    the drawn tokens are identical.
    """
    x = logits / np.float32(TEMPERATURE)
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    probs = e / np.sum(e, axis=-1, keepdims=True)
    cdf = np.cumsum(probs.astype(np.float64), axis=-1)
    cdf /= cdf[:, -1:]
    # searchsorted(cdf, u, side="right") == number of cdf entries <= u (cdf is non-decreasing).
    return np.count_nonzero(cdf <= uniforms[:, None], axis=-1).astype(np.int64)


class OnnxBackend(ModelBackend):
    """onnxruntime on CPU with numpy arrays; bit-identical to the official harness.

    Args:
        model_path: the ONNX file (default ``models/tinyphysics.onnx`` of the project).
        threads: intra-op threads; the official harness uses 1, a batched run profits from all
            cores.  Batched and multi-threaded CPU logits equal the batch-1 logits bit for bit.
    """

    name = "onnxruntime-cpu"

    def __init__(self, model_path: str | Path | None = None, threads: int | None = None) -> None:
        import onnxruntime as ort

        self.model_path = resolve_model_path(model_path)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or os.cpu_count() or 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        # Idle onnxruntime threads otherwise spin for a while after each run, starving the
        # policy's torch threads that run between model calls.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            self.session = ort.InferenceSession(
                self.model_path.read_bytes(), options, ["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises several private exception types
            raise ValueError(f"{self.model_path}: not a loadable ONNX model ({exc})") from None

    def logits(self, states: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """float32 ``[B, 20, V]`` logits of all positions (the bare model call)."""
        return self.session.run(None, {"states": states, "tokens": tokens})[0]

    def sample(self, states: np.ndarray, tokens: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
        return sample_from_logits(self.logits(states, tokens)[:, -1, :], uniforms)


def make_backend(name: str = "onnx", model_path: str | Path | None = None, **kwargs) -> ModelBackend:
    """Build a backend by name: ``onnx`` (CPU, exact)."""
    if name in ("onnx", "onnxruntime", "cpu"):
        return OnnxBackend(model_path, **kwargs)
    raise ValueError(f"unknown simulator backend {name!r}; expected 'onnx'")


__all__ = [
    "CONTEXT_LENGTH",
    "VOCAB_SIZE",
    "ModelBackend",
    "OnnxBackend",
    "default_model_path",
    "make_backend",
    "resolve_model_path",
    "sample_from_logits",
]
