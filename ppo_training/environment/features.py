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

Two observation kinds (``OBS_KINDS``), float32 values hand-scaled to roughly unit range:

``basic`` (``OBS_DIM`` = 27 values):

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

``rich`` (``RICH_DIM`` = 244 values, plus 2 with the model prediction):

=======  ===========================================================
0-6      as ``basic`` 0-6
7        teacher action (steer units)
8-27     the controller's last 20 outputs, oldest first (steer units)
28-47    the last 20 lateral accelerations it was shown, oldest first, / 2
48-96    plan target, 49 steps, / 2
97-145   plan roll, 49 steps, / 2
146-194  plan v_ego minus v_ego, 49 steps, / 5
195-243  plan a_ego, 49 steps, / 2
244-245  (``prediction``) the model's expected next lateral acceleration minus the current
         one, * 5, and its standard deviation, * 5 (see ``sim/prediction.py``)
=======  ===========================================================

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
HISTORY = 20  # steps of history the simulator's model sees
OBS_DIM = 10 + len(PLAN_HORIZONS) + 5
RICH_DIM = 8 + 2 * HISTORY + 4 * PLAN_STEPS
OBS_KINDS = ("basic", "rich")
LAT_SCALE = 0.5
V_SCALE = 1.0 / 30.0

# Feedforward-PID teacher gains.  PID gains are the official baseline's; the feedforward maps
# the mean of the next five plan targets and the road roll to steer.  A least-squares fit of
# logged steer on target and roll over real warm-up rows gave about 0.57 and -0.83; a small grid
# on 96 synthetic training segments then chose 0.5 / -0.7 (0.63x PID's cost there, against
# 0.70x for 0.3 / -0.3 and 0.64x for 0.5 / -0.5).
TEACHER = {"p": 0.195, "i": 0.100, "d": -0.053, "k_target": 0.5, "k_roll": -0.7, "ff_steps": 5}


def obs_dim(kind: str = "basic", prediction: bool = False) -> int:
    """Observation size of an observation kind (``basic`` has no prediction features)."""
    if kind not in OBS_KINDS:
        raise ValueError(f"observation kind must be one of {OBS_KINDS}, got {kind!r}")
    if kind == "basic":
        if prediction:
            raise ValueError("the model prediction features need the 'rich' observation")
        return OBS_DIM
    return RICH_DIM + (2 if prediction else 0)


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
    the histories, returns the observation), then :meth:`record` with the action the controller
    returned.

    Args:
        batch_size: rows.
        xp: array namespace (numpy, or :class:`~ppo_training.sim.backends.TorchArrays`).
        kind: ``"basic"`` or ``"rich"`` observation (module docstring).
        prediction: add the model's expected next lateral acceleration (``rich`` only); then
            :meth:`observe` needs a ``predict`` callable outside the warm-up.
    """

    def __init__(self, batch_size: int, xp=np, kind: str = "basic", prediction: bool = False) -> None:
        self.batch_size = batch_size
        self.xp = xp
        self.kind = kind
        self.prediction = prediction
        self.dim = obs_dim(kind, prediction)
        self.error_integral = xp.zeros(batch_size)
        self.prev_error = xp.zeros(batch_size)
        # Oldest first.  Until 20 calls have been made the early entries are zeros; the harness
        # calls from step 20 on and control starts at step 100, so they are real by then.
        self.hist_actions = xp.zeros((batch_size, HISTORY))
        self.hist_lataccel = xp.zeros((batch_size, HISTORY))
        self.hist_state = xp.zeros((batch_size, HISTORY, 3))
        self.teacher = xp.zeros(batch_size)
        self.predicted = xp.zeros(batch_size)  # expected next lateral acceleration (m/s^2)
        self.predicted_std = xp.zeros(batch_size)
        # the plan columns of the horizons, as an index array of the namespace (on the device for
        # torch: a host index would be copied to the device, and synchronise, at every step)
        self._horizon_cols = xp.asarray(PLAN_HORIZONS - 1)

    @property
    def prev_actions(self):
        """The last ``N_PREV_ACTIONS`` outputs, oldest first ``[B, 3]``."""
        return self.hist_actions[:, HISTORY - N_PREV_ACTIONS :]

    def reset_rows(self, rows) -> None:
        """Forget the memory of some rows (bool mask or indices): a new episode starts there."""
        for name in ("error_integral", "prev_error", "hist_actions", "hist_lataccel", "hist_state", "teacher",
                     "predicted", "predicted_std"):
            getattr(self, name)[rows] = 0.0

    def prediction_inputs(self):
        """(actions ``[B, 20]``, states ``[B, 20, 3]``, lataccels ``[B, 20]``) for the model's
        next step, with the last output repeated as the candidate action (its own effect on the
        next step is small)."""
        xp = self.xp
        actions = xp.concatenate([self.hist_actions[:, 1:], self.hist_actions[:, -1:]], axis=1)
        return actions, self.hist_state, self.hist_lataccel

    def observe(self, target, current, roll, v_ego, a_ego, plan_target, plan_roll, plan_v, plan_a=None,
                predict=None):
        """Observation ``[B, dim]`` float32 of one control call; advances the feature state.

        All arguments are float64: ``[B]`` for the scalars, ``[B, 49]`` (padded) for the plan.
        ``predict(actions, states, lataccels, current) -> (mean, std)`` supplies the model's
        prediction (``prediction=True``); without it (warm-up, whose outputs are discarded) the
        prediction features are zero.  Also sets :attr:`teacher` to the teacher's action.
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
        state = xp.concatenate([roll[:, None], v_ego[:, None], a_ego[:, None]], axis=1)
        self.hist_state = xp.concatenate([self.hist_state[:, 1:], state[:, None, :]], axis=1)
        self.hist_lataccel = xp.concatenate([self.hist_lataccel[:, 1:], current[:, None]], axis=1)
        if self.prediction and predict is not None:
            self.predicted, self.predicted_std = predict(*self.prediction_inputs(), current)
        elif self.prediction:
            self.predicted, self.predicted_std = current, xp.zeros(len(target))
        obs = xp.empty((len(target), self.dim), dtype=xp.float64)
        obs[:, 0] = target * LAT_SCALE
        obs[:, 1] = current * LAT_SCALE
        obs[:, 2] = error * LAT_SCALE
        obs[:, 3] = xp.clip(self.error_integral * 0.05, -5.0, 5.0)
        obs[:, 4] = roll * LAT_SCALE
        obs[:, 5] = v_ego * V_SCALE
        obs[:, 6] = a_ego * 0.5
        if self.kind == "basic":
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
        obs[:, 7] = self.teacher
        k = 8
        obs[:, k : k + HISTORY] = self.hist_actions
        k += HISTORY
        obs[:, k : k + HISTORY] = self.hist_lataccel * LAT_SCALE
        k += HISTORY
        obs[:, k : k + PLAN_STEPS] = plan_target * LAT_SCALE
        k += PLAN_STEPS
        obs[:, k : k + PLAN_STEPS] = plan_roll * LAT_SCALE
        k += PLAN_STEPS
        obs[:, k : k + PLAN_STEPS] = (plan_v - v_ego[:, None]) * 0.2
        k += PLAN_STEPS
        obs[:, k : k + PLAN_STEPS] = plan_a * 0.5
        k += PLAN_STEPS
        if self.prediction:
            obs[:, k] = (self.predicted - current) * 5.0
            obs[:, k + 1] = self.predicted_std * 5.0
        return xp.asarray(obs, dtype=xp.float32)

    def record(self, actions) -> None:
        """Remember the actions the controller returned (newest last)."""
        xp = self.xp
        newest = xp.asarray(actions, dtype=xp.float64)[:, None]
        self.hist_actions = xp.concatenate([self.hist_actions[:, 1:], newest], axis=1)

    @property
    def last_action(self) -> np.ndarray:
        return self.hist_actions[:, -1]


def action_to_steer(a, last_output, action_mode: str, max_delta: float, teacher=None, xp=np, offset=None):
    """Steer (float64 ``[B]``) of normalised actions ``a`` in [-1, 1] (clipped).

    ``delta``: ``clip(last_output + max_delta * a, -2, 2)`` (a bounded change of the previous
    steer); ``residual``: ``clip(teacher + max_delta * a, -2, 2)`` (a bounded correction of this
    call's teacher action); ``absolute``: ``2 * a``.  ``offset`` (float64 ``[B]``, e.g. the model
    correction of :func:`model_correction`) is added before clipping.
    """
    a = xp.clip(xp.asarray(a, dtype=xp.float64).reshape(len(last_output)), -1.0, 1.0)
    if action_mode == "delta":
        steer = last_output + max_delta * a
    elif action_mode == "residual":
        steer = teacher + max_delta * a
    else:
        steer = a * STEER_LIMIT
    if offset is not None:
        steer = steer + offset
    return xp.clip(steer, -STEER_LIMIT, STEER_LIMIT)


def model_correction(features: FeatureState, gain: float):
    """Steer offset ``gain * (current - predicted next)`` (float64 ``[B]``), or None for gain 0.

    The model's steer response shows up over the following steps rather than the next one, so
    this acts as a damper on the lateral-acceleration change the model expects next.
    """
    if not gain:
        return None
    return gain * (features.hist_lataccel[:, -1] - features.predicted)


def plan_row(values, fallback) -> np.ndarray:
    """One official future-plan list as a padded ``[1, 49]`` array (see :func:`pad_plan`)."""
    n = min(len(values), PLAN_STEPS)
    row = np.zeros((1, PLAN_STEPS))
    row[0, :n] = values[:n]
    return pad_plan(row, np.array([n]), np.array([fallback], dtype=np.float64))
