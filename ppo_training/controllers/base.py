"""The batched controller interface, defined beside the engine that drives it (``sim.control``)."""
from __future__ import annotations

from ..sim.control import BatchedController, ControlInputs

__all__ = ["BatchedController", "ControlInputs"]
