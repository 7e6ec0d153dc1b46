"""Hand-written baselines: the zero controller and the official PID, batched."""
from __future__ import annotations

import numpy as np

from ..sim.control import BatchedController, ControlInputs


class ZeroController(BatchedController):
    """Always steers 0."""

    name = "zero"

    def reset(self, batch_size: int) -> None:
        pass

    def __call__(self, inputs: ControlInputs) -> np.ndarray:
        return inputs.target * 0.0 + 0.0  # +0.0: never a negative zero


class PIDController(BatchedController):
    """The challenge's baseline PID on lateral-acceleration error, one state per row.

    ``error = target - current; integral += error; u = p*error + i*integral + d*(error - prev)``,
    evaluated in the same order as the official controller, so its actions are bit-identical.
    """

    name = "pid"

    def __init__(self, p: float = 0.195, i: float = 0.100, d: float = -0.053) -> None:
        self.p, self.i, self.d = p, i, d

    def reset(self, batch_size: int) -> None:
        # Scalars until the first call: then arrays of whatever kind the engine uses (numpy, torch).
        self.error_integral = 0.0
        self.prev_error = 0.0

    def reset_rows(self, rows: np.ndarray) -> None:
        if not isinstance(self.error_integral, float):
            self.error_integral[rows] = 0.0
            self.prev_error[rows] = 0.0

    def __call__(self, inputs: ControlInputs) -> np.ndarray:
        error = inputs.target - inputs.current
        self.error_integral = self.error_integral + error
        error_diff = error - self.prev_error
        self.prev_error = error
        return self.p * error + self.i * self.error_integral + self.d * error_diff
