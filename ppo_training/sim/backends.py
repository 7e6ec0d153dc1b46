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
from ..constants import CONTEXT_LENGTH, MAX_ACC_DELTA, TEMPERATURE, VOCAB_SIZE
from . import tokenizer
from .prediction import next_moments, prediction_inputs

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
    #: Array namespace of the controllers' and features' math: numpy, or :class:`TorchArrays`.
    xp = np

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


def last_position_graph(model_bytes: bytes) -> bytes:
    """The ONNX graph with the last block's MLP, the final LayerNorm and the head applied to the
    last position only.

    Only the last position's logits are ever used, and after the last block's attention nothing
    mixes positions any more: gathering the last position from that residual stream skips 19/20
    of the last MLP, of the final LayerNorm and of the head (about a quarter of the model's
    work).  Every remaining operation sees the same inputs row by row, and the logits are
    bit-identical to the full graph's (tests compare them on random inputs of several batch
    sizes, and rollouts against the unmodified model).  Output: ``[B, 1, 1024]``.
    """
    import re

    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load_from_string(model_bytes)
    graph = model.graph
    # "/h.<k>/Add" adds the attention output of block k to the residual stream.
    attn_adds = sorted((n for n in graph.node if n.op_type == "Add" and re.fullmatch(r"/h\.(\d+)/Add", n.name)),
                       key=lambda n: int(re.fullmatch(r"/h\.(\d+)/Add", n.name).group(1)))
    if not attn_adds or not any(n.output and n.output[0].startswith("/layer_norm_f/") for n in graph.node):
        raise ValueError("the last block's attention residual or the final layer norm was not found in the graph")
    src = attn_adds[-1].output[0]
    graph.initializer.append(numpy_helper.from_array(np.array([CONTEXT_LENGTH - 1], dtype=np.int64),
                                                     name="last_position_index"))
    gather = helper.make_node("Gather", [src, "last_position_index"], ["last_position"], axis=1,
                              name="last_position_gather")
    for node in graph.node:
        for k, name in enumerate(node.input):
            if name == src:
                node.input[k] = "last_position"
    producer = next(i for i, n in enumerate(graph.node) if src in n.output)
    graph.node.insert(producer + 1, gather)
    dim = graph.output[0].type.tensor_type.shape.dim[1]
    dim.ClearField("dim_param")
    dim.dim_value = 1
    return model.SerializeToString()


class OnnxBackend(ModelBackend):
    """onnxruntime on CPU with numpy arrays; bit-identical to the official harness.

    Args:
        model_path: the ONNX file (default ``models/tinyphysics.onnx`` of the project).
        threads: intra-op threads for batched calls (default: all cores).  Batches smaller than
            ``SMALL_BATCH`` use a single-thread session, which is faster for them.  Batched and
            multi-threaded CPU logits equal the batch-1 logits bit for bit.
        last_position_only: run the final LayerNorm and head for the last position only
            (:func:`last_position_graph`; same logits, less work).
    """

    name = "onnxruntime-cpu"
    SMALL_BATCH = 8

    def __init__(self, model_path: str | Path | None = None, threads: int | None = None,
                 last_position_only: bool = True) -> None:
        self.model_path = resolve_model_path(model_path)
        model_bytes = self.model_path.read_bytes()
        try:
            if last_position_only:
                model_bytes = last_position_graph(model_bytes)
            threads = threads or os.cpu_count() or 1
            self.session = self._session(model_bytes, threads)
            self.small_session = self.session if threads == 1 else self._session(model_bytes, 1)
        except Exception as exc:  # onnx / onnxruntime raise several private exception types
            raise ValueError(f"{self.model_path}: not a loadable TinyPhysics ONNX model ({exc})") from None

    @staticmethod
    def _session(model_bytes: bytes, threads: int):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        # Idle onnxruntime threads otherwise spin for a while after each run, starving the
        # policy's torch threads that run between model calls.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        return ort.InferenceSession(model_bytes, options, ["CPUExecutionProvider"])

    def logits(self, states: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """float32 logits ``[B, P, V]`` (P = 1 with ``last_position_only``, else 20)."""
        session = self.small_session if len(states) < self.SMALL_BATCH else self.session
        return session.run(None, {"states": states, "tokens": tokens})[0]

    def sample(self, states: np.ndarray, tokens: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
        return sample_from_logits(self.logits(states, tokens)[:, -1, :], uniforms)

    def predict_next(self, actions, states, lataccels, current):
        """Mean and std ``[B]`` of the next lateral acceleration (:mod:`~ppo_training.sim.prediction`)."""
        st, tokens = prediction_inputs(actions, states, lataccels)
        return next_moments(self.logits(st, tokens)[:, -1, :], current)


def make_backend(name: str = "onnx", model_path: str | Path | None = None, **kwargs) -> ModelBackend:
    """Build a backend by name: ``onnx`` (onnxruntime CPU, exact) or ``torch`` (any device)."""
    if name in ("onnx", "onnxruntime", "cpu"):
        return OnnxBackend(model_path, **kwargs)
    if name == "torch":
        return TorchBackend(model_path, **kwargs)
    raise ValueError(f"unknown simulator backend {name!r}; expected 'onnx' or 'torch'")


__all__ = [
    "PRECISIONS",
    "TorchBackend",
    "CONTEXT_LENGTH",
    "VOCAB_SIZE",
    "ModelBackend",
    "OnnxBackend",
    "default_model_path",
    "make_backend",
    "resolve_model_path",
    "sample_from_logits",
]


PRECISIONS = ("fp32", "tf32", "bf16")


class TorchArrays:
    """The few numpy functions the features and controllers use, over torch tensors on a device.

    Signatures follow numpy (``axis``, ``dtype``; ``std`` is the population std like numpy's), so
    the same code runs with ``xp=numpy`` on the host or ``xp=TorchArrays(device)`` on a GPU.
    """

    def __init__(self, device) -> None:
        import torch

        self.torch = torch
        self.device = torch.device(device)
        self.float64, self.float32 = torch.float64, torch.float32

    def asarray(self, x, dtype=None):
        if isinstance(x, self.torch.Tensor):
            return x.to(device=self.device, dtype=dtype or x.dtype)
        return self.torch.as_tensor(np.asarray(x), dtype=dtype, device=self.device)

    def zeros(self, shape, dtype=None):
        return self.torch.zeros(shape, dtype=dtype or self.float64, device=self.device)

    def empty(self, shape, dtype=None):
        return self.torch.empty(shape, dtype=dtype or self.float64, device=self.device)

    def copy(self, x):
        return x.clone()

    def mean(self, x, axis):
        return x.mean(dim=axis)

    def std(self, x, axis):
        return x.std(dim=axis, correction=0)

    def clip(self, x, lo, hi):
        return self.torch.clamp(self.asarray(x), lo, hi)

    def concatenate(self, xs, axis=0):
        return self.torch.cat(list(xs), dim=axis)



class TorchBackend(ModelBackend):
    """The model rebuilt in torch, arrays as torch tensors on ``device`` (CPU or GPU).

    Sampling reproduces the official random stream: the engine draws each segment's uniforms from
    its own ``RandomState`` at reset and moves them to the device once; the softmax is float32,
    the cumulative distribution float64 and tokens decode with the float64 bins.  In ``fp32`` the
    logits differ from onnxruntime only by float rounding (relative error ~1e-6), so a token
    differs only when a uniform falls within that rounding of a bin boundary.

    Args:
        model_path: the ONNX file whose initializers are loaded.
        device: ``"cpu"``, ``"cuda"``, ... (default: cuda when available).
        precision: ``fp32`` (exact matmuls), ``tf32`` (TensorFloat-32 matmuls on Ampere+ GPUs) or
            ``bf16`` (bfloat16 weights and activations; logits returned in float32).
        compile: wrap the model in ``torch.compile`` (``reduce-overhead`` mode, which uses CUDA
            graphs on a GPU); falls back to eager execution with a warning when compilation
            is unavailable or fails (the reason is kept in :attr:`compile_error`).
        compile_options: keyword arguments of ``torch.compile`` instead of the default
            ``mode="reduce-overhead", dynamic=False`` (one static graph per batch size), e.g.
            ``{"backend": "eager"}`` to check graph capture quickly without a compiler.
    """

    name = "torch"

    def __init__(self, model_path: str | Path | None = None, device: str | None = None,
                 precision: str = "fp32", compile: bool = False, compile_options: dict | None = None) -> None:
        import torch

        from .torch_model import TinyPhysicsTorch

        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        self.torch = torch
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.precision = precision
        self.model_path = resolve_model_path(model_path)
        model = TinyPhysicsTorch(self.model_path)
        if precision == "bf16":
            model = model.to(torch.bfloat16)
        self.model = model.to(self.device).eval()
        self._forward = self.model
        self.compiled = False
        self.compile_error: str | None = None
        if compile:
            options = {"mode": "reduce-overhead", "dynamic": False} if compile_options is None else dict(compile_options)
            try:
                self._forward = torch.compile(self.model, **options)
                self.compiled = True
            except Exception as exc:  # no compiler toolchain, unsupported platform, ...
                import warnings

                self.compile_error = f"{type(exc).__name__}: {exc}"
                warnings.warn(f"torch.compile unavailable ({exc}); the simulator model runs eagerly")
        self.bins = torch.as_tensor(tokenizer.BINS, device=self.device)
        self.name = f"torch-{self.device.type}-{precision}"
        self.xp = TorchArrays(self.device)

    def _dtype(self, name: str):
        return {"float64": self.torch.float64, "float32": self.torch.float32, "int64": self.torch.int64}[name]

    def asarray(self, a):
        return self.torch.as_tensor(np.asarray(a), device=self.device)

    def to_numpy(self, a) -> np.ndarray:
        return a.detach().cpu().numpy() if isinstance(a, self.torch.Tensor) else np.asarray(a)

    def zeros(self, shape, dtype):
        return self.torch.zeros(shape, dtype=self._dtype(dtype), device=self.device)

    def clip(self, x, lo, hi):
        x = x if isinstance(x, self.torch.Tensor) else self.torch.as_tensor(np.asarray(x), device=self.device)
        return self.torch.clamp(x, lo, hi)

    def encode(self, lataccel):
        # np.digitize(x, bins, right=True) == torch.bucketize(x, bins, right=False)
        return self.torch.bucketize(self.torch.clamp(lataccel, -5.0, 5.0), self.bins, right=False)

    def decode(self, tokens):
        return self.bins[tokens]

    def logits(self, states, tokens):
        """float32 ``[B, V]`` last-position logits (a tensor of its own, also when compiled)."""
        torch = self.torch
        if self.device.type != "cuda":
            return self._logits(states, tokens)
        # TensorFloat-32 for the simulator's matmuls only: the flags are global, and the policy's
        # log-probabilities (PPO's ratios) should stay in full fp32.
        saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = self.precision == "tf32"
        try:
            return self._logits(states, tokens)
        finally:
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved

    def _logits(self, states, tokens):
        torch = self.torch
        with torch.no_grad():
            if self.compiled:
                try:
                    # CUDA graphs reuse their output memory at the next replay: copy it out.
                    return self._forward(states, tokens).clone()
                except Exception as exc:  # compilation happens at the first call (and per new shape)
                    import warnings

                    self.compile_error = f"{type(exc).__name__}: {exc}"
                    warnings.warn(f"torch.compile failed ({self.compile_error}); running eagerly")
                    self.compiled, self._forward = False, self.model
            return self.model(states, tokens)

    def predict_next(self, actions, states, lataccels, current):
        """Mean and std ``[B]`` of the next lateral acceleration, as :mod:`~ppo_training.sim.prediction`
        computes them, on the device."""
        torch = self.torch
        st = torch.cat([actions[..., None], states], dim=-1).float()
        probs = torch.softmax(self.logits(st, self.encode(lataccels)).float() / TEMPERATURE, dim=-1).double()
        values = torch.clamp(self.bins[None, :], (current - MAX_ACC_DELTA)[:, None], (current + MAX_ACC_DELTA)[:, None])
        total = probs.sum(-1)
        mean = (probs * values).sum(-1) / total
        var = (probs * (values - mean[:, None]) ** 2).sum(-1) / total
        return mean, var.sqrt()

    def sample(self, states, tokens, uniforms):
        torch = self.torch
        x = self.logits(states, tokens) / TEMPERATURE
        probs = torch.softmax(x, dim=-1)
        cdf = torch.cumsum(probs.double(), dim=-1)
        cdf = cdf / cdf[:, -1:]
        return (cdf <= uniforms[:, None]).sum(dim=-1)
