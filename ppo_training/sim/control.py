"""The engine's controller interface: what a controller sees at each step and what it implements.

It lives in ``sim`` because the engine drives it; ``ppo_training.controllers`` builds on it (and
re-exports :class:`BatchedController`), so the engine never imports a controller module.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from ..constants import CONTROL_START_IDX, FUTURE_PLAN_STEPS
from .backends import Array

PLAN = FUTURE_PLAN_STEPS - 1  # the plan at step i holds rows i+1 .. i+49


class ControlInputs:
    """What a controller sees at one step, for the whole batch (backend arrays, ``[B]`` each).

    Attributes:
        step: step index ``i`` (20 .. T-1).
        warmup: True before step 100, where the action is replaced by the logged steer.
        target: target lateral acceleration at step i, m/s^2.
        current: current (simulated) lateral acceleration before step i's update, m/s^2.
        roll_lataccel, v_ego, a_ego: the state at step i.
        future_*: ``[B, 49]`` plan rows i+1 .. i+49, edge-padded past a segment's end;
            ``future_length[b]`` of them are real.

    ``sim`` is the :class:`~ppo_training.sim.engine.BatchedSimulator` stepping the batch; the plan
    rows are sliced from its padded columns only when a controller asks for them.
    """

    __slots__ = ("_sim", "step", "warmup", "target", "current", "roll_lataccel", "v_ego", "a_ego")

    def __init__(self, sim: Any, step: int) -> None:
        self._sim = sim
        self.step = step
        self.warmup = step < CONTROL_START_IDX
        self.target = sim.target[:, step]
        self.current = sim.current
        self.roll_lataccel = sim.roll_lataccel[:, step]
        self.v_ego = sim.v_ego[:, step]
        self.a_ego = sim.a_ego[:, step]

    @property
    def future_lataccel(self) -> Array:
        return self._sim.target[:, self.step + 1 : self.step + 1 + PLAN]

    @property
    def future_roll_lataccel(self) -> Array:
        return self._sim.roll_lataccel[:, self.step + 1 : self.step + 1 + PLAN]

    @property
    def future_v_ego(self) -> Array:
        return self._sim.v_ego[:, self.step + 1 : self.step + 1 + PLAN]

    @property
    def future_a_ego(self) -> Array:
        return self._sim.a_ego[:, self.step + 1 : self.step + 1 + PLAN]

    @property
    def future_length(self) -> np.ndarray:
        """int ``[B]`` number of real plan rows (49 except near a segment's end)."""
        return np.clip(self._sim.lengths - 1 - self.step, 0, PLAN)

    @property
    def batch_size(self) -> int:
        return self._sim.batch_size

    @property
    def xp(self):
        """Array namespace of these inputs (numpy, or the torch backend's)."""
        return self._sim.backend.xp


class BatchedController(ABC):
    """A controller for ``B`` segments at once.

    The engine calls :meth:`reset` with the batch size before a rollout, then the controller once
    per step with :class:`ControlInputs` (warm-up steps included, where its output is discarded
    but its internal state may advance, exactly like an official controller sees those steps).
    It returns float64 ``[B]`` steer commands in [-2, 2] (the engine clips).
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
