"""A plain, unbatched TinyPhysics rollout written straight from SPEC.md.

This is the executable specification the batched engine is tested against, and the
"one segment at a time, batch-1 model call" baseline of the benchmarks.  It deliberately shares
no rollout code with :mod:`ppo_training.sim.engine`: histories are Python lists, the model is run
on ``[1, 20, 4]`` inputs, the softmax covers all 20 positions and the draw is a literal
``RandomState.choice(1024, p=probs)``.  Nothing else in the project uses it.
"""
from __future__ import annotations

import hashlib
from collections import namedtuple

import numpy as np
import pandas as pd

State = namedtuple("State", ["roll_lataccel", "v_ego", "a_ego"])
FuturePlan = namedtuple("FuturePlan", ["lataccel", "roll_lataccel", "v_ego", "a_ego"])

_BINS = np.linspace(-5, 5, 1024)


class ReferencePID:
    """The baseline PID in the official controller format (``update(target, current, state, plan)``)."""

    def __init__(self) -> None:
        self.p, self.i, self.d = 0.195, 0.100, -0.053
        self.error_integral = 0
        self.prev_error = 0

    def update(self, target_lataccel, current_lataccel, state, future_plan):
        error = target_lataccel - current_lataccel
        self.error_integral += error
        error_diff = error - self.prev_error
        self.prev_error = error
        return self.p * error + self.i * self.error_integral + self.d * error_diff


class ReferenceZero:
    """Always steers 0, in the official controller format."""

    def update(self, target_lataccel, current_lataccel, state, future_plan):
        return 0.0


def reference_rollout(session, data_path: str, controller, end: int | None = None) -> dict:
    """Roll one segment out the way SPEC.md describes.

    Args:
        session: an ``onnxruntime.InferenceSession`` of the TinyPhysics model.
        data_path: the segment path string (also the seed key).
        controller: an object with the official ``update`` method.
        end: stop before this step (default: every row).

    Returns:
        dict with ``lataccel_cost``, ``jerk_cost``, ``total_cost`` and the ``target`` / ``current``
        / ``action`` history lists.
    """
    df = pd.read_csv(data_path)
    roll = np.sin(df["roll"].values) * 9.81
    v, a = df["vEgo"].values, df["aEgo"].values
    target, steer = df["targetLateralAcceleration"].values, -df["steerCommand"].values
    n = len(df) if end is None else min(end, len(df))

    state_hist = [State(roll[i], v[i], a[i]) for i in range(20)]
    action_hist = steer[:20].tolist()
    current_hist = [target[i] for i in range(20)]
    target_hist = [target[i] for i in range(20)]
    current = current_hist[-1]
    rng = np.random.RandomState(int(hashlib.md5(data_path.encode()).hexdigest(), 16) % 10**4)

    for i in range(20, n):
        state_hist.append(State(roll[i], v[i], a[i]))
        target_hist.append(target[i])
        plan = FuturePlan(
            target[i + 1 : i + 50].tolist(), roll[i + 1 : i + 50].tolist(),
            v[i + 1 : i + 50].tolist(), a[i + 1 : i + 50].tolist(),
        )
        action = controller.update(target_hist[i], current, state_hist[i], plan)
        if i < 100:
            action = steer[i]
        action_hist.append(np.clip(action, -2, 2))

        states = np.column_stack([action_hist[-20:], [list(s) for s in state_hist[-20:]]])
        tokens = np.digitize(np.clip(current_hist[-20:], -5, 5), _BINS, right=True)
        logits = session.run(None, {
            "states": np.expand_dims(states, 0).astype(np.float32),
            "tokens": np.expand_dims(tokens, 0).astype(np.int64),
        })[0]
        x = logits / 0.8
        e = np.exp(x - np.max(x, axis=-1, keepdims=True))
        probs = e / np.sum(e, axis=-1, keepdims=True)
        token = rng.choice(1024, p=probs[0, -1])
        pred = np.clip(_BINS[token], current - 0.5, current + 0.5)
        current = pred if i >= 100 else target[i]
        current_hist.append(current)

    t = np.array(target_hist)[100:500]
    p = np.array(current_hist)[100:500]
    lat = np.mean((t - p) ** 2) * 100
    jerk = np.mean((np.diff(p) / 0.1) ** 2) * 100
    return {
        "lataccel_cost": lat, "jerk_cost": jerk, "total_cost": lat * 50.0 + jerk,
        "target": target_hist, "current": current_hist, "action": action_hist,
    }
