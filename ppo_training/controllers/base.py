"""The batched controller interface."""
from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from ..sim.engine import ControlInputs


class BatchedController(ABC):
    """A controller for ``B`` segments at once.

    The engine calls :meth:`reset` with the batch size before a rollout, then the controller once
    per step with :class:`~ppo_training.sim.engine.ControlInputs` (warm-up steps included, where
    its output is discarded but its internal state may advance, exactly like an official
    controller sees those steps).  It returns float64 ``[B]`` steer commands in [-2, 2] (the engine
    clips).
    """

    #: Short name used in reports.
    name: str = "controller"

    @abstractmethod
    def reset(self, batch_size: int) -> None:
        """Start new episodes for all rows."""

    def reset_rows(self, rows: np.ndarray) -> None:
        """Start new episodes for some rows (bool mask or indices), keeping the others' state.

        Stateless controllers need not override this.
        """

    @abstractmethod
    def __call__(self, inputs: ControlInputs) -> np.ndarray:
        """Steer commands, float ``[B]``."""
