"""The TinyPhysics simulator: one batched rollout engine over interchangeable model backends."""
from .backends import ModelBackend, OnnxBackend, default_model_path, make_backend
from .control import BatchedController, ControlInputs
from .costs import compute_costs
from .engine import BatchedSimulator, RolloutResult
from .tokenizer import BINS, decode, encode

__all__ = [
    "BINS",
    "BatchedController",
    "BatchedSimulator",
    "ControlInputs",
    "ModelBackend",
    "OnnxBackend",
    "RolloutResult",
    "compute_costs",
    "decode",
    "default_model_path",
    "encode",
    "make_backend",
]
