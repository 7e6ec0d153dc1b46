"""Observation features and the feedforward-PID teacher, from what an official controller sees.

Everything here is plain float64 numpy on ``[B]`` / ``[B, 49]`` arrays, computed from the
arguments of an official ``Controller.update`` call (target, current, state, future plan) plus a
small feature state that the controller keeps itself (error integral, previous error, its own
previous outputs).  A trained policy can therefore be exported as a numpy-only controller that
computes exactly the same features, call by call (row-wise the arithmetic is identical for any
batch size).

Warm-up: the official harness calls the controller from step 20 on and discards its output
before step 100.  The feature state sees those calls too; during them the "controller output"
recorded as previous action is the teacher's action, so a delta-action policy starts at step 100
from a sensible steer.

Observation layout (``OBS_DIM`` float32 values, hand-scaled to roughly unit range):

====  ===========================================================
0     target lateral acceleration / 2            (m/s^2)
1     current lateral acceleration / 2
2     error = target - current, / 2
3     error integral (sum over calls) * 0.05, clipped to ±5
4     roll lateral acceleration / 2
5     v_ego / 30                                 (m/s)
6     a_ego / 2                                  (m/s^2)
7-9   the controller's last three outputs        (steer units)
10-21 plan target at horizons 1,2,3,4,5,7,10,15,20,30,40,49 steps, / 2
22    mean of the plan target over 49 steps, / 2
23    std of the plan target over 49 steps, / 2
24    mean of the plan roll over 49 steps, / 2
25    mean of the plan v_ego / 30 minus v_ego / 30
26    teacher action (steer units)
====  ===========================================================

Plans shorter than 49 rows (near a segment's end) are edge-padded with their last value (the
current target when empty), which is what the batched engine's padded columns contain.

``xp`` is the array namespace: numpy (the default, and the only one the exported controller
uses) or an object with the same few functions over torch tensors on a device
(:class:`ppo_training.sim.backends.TorchArrays`), so training on a GPU computes the very same
features without leaving the device.
"""
from __future__ import annotations

import numpy as np

STEER_LIMIT = 2.0  # the simulator clips steer to [-2, 2]
PLAN_STEPS = 49
PLAN_HORIZONS = np.array([1, 2, 3, 4, 5, 7, 10, 15, 20, 30, 40, 49])
N_PREV_ACTIONS = 3
OBS_DIM = 10 + len(PLAN_HORIZONS) + 5
LAT_SCALE = 0.5
V_SCALE = 1.0 / 30.0

# Feedforward-PID teacher gains.  PID gains are the official baseline's; the feedforward maps
# the mean of the next five plan targets and the road roll to steer.  A least-squares fit of
# logged steer on target and roll over real warm-up rows gave about 0.57 and -0.83; a small grid
# on 96 synthetic training segments then chose 0.5 / -0.7 (0.63x PID's cost there, against
# 0.70x for 0.3 / -0.3 and 0.64x for 0.5 / -0.5).
TEACHER = {"p": 0.195, "i": 0.100, "d": -0.053, "k_target": 0.5, "k_roll": -0.7, "ff_steps": 5}


def pad_plan(plan, length: np.ndarray, fallback, xp=np):
    """``[B, 49]`` plan rows with everything past ``length`` replaced by the last real value.

    Args:
        plan: float64 ``[B, 49]``, only the first ``length[b]`` values of row b are real; returned
            as is (not copied) when every row is full.
        length: int ``[B]`` real entries per row, a host array.
        fallback: float64 ``[B]`` value for an empty plan (the current target).
    """
    plan = xp.asarray(plan, dtype=xp.float64)
    length = np.asarray(length.cpu() if hasattr(length, "cpu") else length)  # host ints (numpy normally)
    rows = np.flatnonzero(length < plan.shape[1])
    if len(rows) == 0:  # full plans (the usual case): nothing to pad, nothing to copy
        return plan
    plan = xp.copy(plan)
    for b in rows:
        k = int(length[b])
        plan[b, k:] = plan[b, k - 1] if k > 0 else fallback[b]
    return plan


class FeatureState:
    """Per-row controller memory and the observation / teacher computations.

    Call order per control step, for every row: :meth:`observe` (updates the error integral and
    returns the observation), then :meth:`record` with the action the controller returned.
    """

    def __init__(self, batch_size: int, xp=np) -> None:
        self.batch_size = batch_size
        self.xp = xp
        self.error_integral = xp.zeros(batch_size)
        self.prev_error = xp.zeros(batch_size)
        self.prev_actions = xp.zeros((batch_size, N_PREV_ACTIONS))
        self.teacher = xp.zeros(batch_size)
        # the plan columns of the horizons, as an index array of the namespace (on the device for
        # torch: a host index would be copied to the device, and synchronise, at every step)
        self._horizon_cols = xp.asarray(PLAN_HORIZONS - 1)

    def reset_rows(self, rows) -> None:
        """Forget the memory of some rows (bool mask or indices): a new episode starts there."""
        self.error_integral[rows] = 0.0
        self.prev_error[rows] = 0.0
        self.prev_actions[rows] = 0.0
        self.teacher[rows] = 0.0

    def observe(self, target, current, roll, v_ego, a_ego, plan_target, plan_roll, plan_v):
        """Observation ``[B, OBS_DIM]`` float32 of one control call; advances the error state.

        All arguments are float64: ``[B]`` for the scalars, ``[B, 49]`` (padded) for the plan.
        Also sets :attr:`teacher` to the teacher's action for this call.
        """
        xp = self.xp
        error = target - current
        self.error_integral = self.error_integral + error
        error_diff = error - self.prev_error
        self.prev_error = error
        ff_target = xp.mean(plan_target[:, : TEACHER["ff_steps"]], axis=1)
        self.teacher = (
            TEACHER["p"] * error + TEACHER["i"] * self.error_integral + TEACHER["d"] * error_diff
            + TEACHER["k_target"] * ff_target + TEACHER["k_roll"] * roll
        )
        obs = xp.empty((len(target), OBS_DIM), dtype=xp.float64)
        obs[:, 0] = target * LAT_SCALE
        obs[:, 1] = current * LAT_SCALE
        obs[:, 2] = error * LAT_SCALE
        obs[:, 3] = xp.clip(self.error_integral * 0.05, -5.0, 5.0)
        obs[:, 4] = roll * LAT_SCALE
        obs[:, 5] = v_ego * V_SCALE
        obs[:, 6] = a_ego * 0.5
        obs[:, 7 : 7 + N_PREV_ACTIONS] = self.prev_actions
        k = 7 + N_PREV_ACTIONS
        obs[:, k : k + len(PLAN_HORIZONS)] = plan_target[:, self._horizon_cols] * LAT_SCALE
        k += len(PLAN_HORIZONS)
        obs[:, k] = xp.mean(plan_target, axis=1) * LAT_SCALE
        obs[:, k + 1] = xp.std(plan_target, axis=1) * LAT_SCALE
        obs[:, k + 2] = xp.mean(plan_roll, axis=1) * LAT_SCALE
        obs[:, k + 3] = xp.mean(plan_v, axis=1) * V_SCALE - v_ego * V_SCALE
        obs[:, k + 4] = self.teacher
        return xp.asarray(obs, dtype=xp.float32)

    def record(self, actions) -> None:
        """Remember the actions the controller returned (newest last)."""
        xp = self.xp
        newest = xp.asarray(actions, dtype=xp.float64)[:, None]
        self.prev_actions = xp.concatenate([self.prev_actions[:, 1:], newest], axis=1)

    @property
    def last_action(self) -> np.ndarray:
        return self.prev_actions[:, -1]


def action_to_steer(a, last_output, action_mode: str, max_delta: float, teacher=None, xp=np):
    """Steer (float64 ``[B]``) of normalised actions ``a`` in [-1, 1] (clipped).

    ``delta``: ``clip(last_output + max_delta * a, -2, 2)`` (a bounded change of the previous
    steer); ``residual``: ``clip(teacher + max_delta * a, -2, 2)`` (a bounded correction of this
    call's teacher action); ``absolute``: ``2 * a``.
    """
    a = xp.clip(xp.asarray(a, dtype=xp.float64).reshape(len(last_output)), -1.0, 1.0)
    if action_mode == "delta":
        return xp.clip(last_output + max_delta * a, -STEER_LIMIT, STEER_LIMIT)
    if action_mode == "residual":
        return xp.clip(teacher + max_delta * a, -STEER_LIMIT, STEER_LIMIT)
    return a * STEER_LIMIT


def plan_row(values, fallback) -> np.ndarray:
    """One official future-plan list as a padded ``[1, 49]`` array (see :func:`pad_plan`)."""
    n = min(len(values), PLAN_STEPS)
    row = np.zeros((1, PLAN_STEPS))
    row[0, :n] = values[:n]
    return pad_plan(row, np.array([n]), np.array([fallback], dtype=np.float64))
