"""Gymnasium environments for lateral control on TinyPhysics.

* :class:`LateralControlEnv` (``gymnasium.Env``): one segment per episode.
* :class:`VectorizedLateralControlEnv` (``gymnasium.vector.VectorEnv``): N segments advance in
  lockstep over the batched engine, one model call per step for all of them.
* :func:`make_async_env`: ``gymnasium.vector.AsyncVectorEnv`` of :class:`LateralControlEnv`, each
  worker with its own model session (for comparison and for custom environments).

Episode: ``reset`` picks a random file from the env's list (seeded), builds the simulator and
fast-forwards the warm-up (steps 20-99, logged steer applied) exactly as the official simulator
runs it, while the feature state sees those calls like an official controller would.  Each
``step`` then applies the policy's action at steps 100 .. 499; the episode terminates at step 500
(later steps do not count).  Reward: minus each step's contribution to the official score,

    r_i = -(50 * 100 / 400 * (target_i - pred_i)^2 + [i > 100] * 100 / 399 * ((pred_i - pred_{i-1}) / 0.1)^2),

so the undiscounted return equals ``-total_cost``; the episode's exact costs are in ``info``
(``lataccel_cost``, ``jerk_cost``, ``total_cost``, ``segment``) at the final step.

Action: one value in [-1, 1].  ``action_mode="delta"``: steer = clip(previous steer output +
``max_delta`` * a, -2, 2); ``"residual"``: steer = clip(teacher + ``max_delta`` * a, -2, 2);
``"absolute"``: steer = 2 * a.  Both vector flavours use gymnasium's
``SAME_STEP`` autoreset: the returned observation after a final step is the next episode's first
one, and ``info["final_obs"]`` / ``info["final_info"]`` hold the finished episodes'.
"""
from __future__ import annotations

import multiprocessing as mp
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from ..constants import CONTROL_START_IDX, COST_END_IDX, DEL_T, LAT_ACCEL_COST_MULTIPLIER
from ..data.segments import Segment, load_segment
from ..sim.backends import ModelBackend, make_backend
from ..sim.engine import BatchedSimulator, ControlInputs
from .features import FeatureState, model_correction, obs_dim, pad_plan
from .features import action_to_steer as features_action_to_steer

LAT_WEIGHT = LAT_ACCEL_COST_MULTIPLIER * 100.0 / (COST_END_IDX - CONTROL_START_IDX)
JERK_WEIGHT = 100.0 / (COST_END_IDX - CONTROL_START_IDX - 1) / DEL_T**2


@dataclass
class EnvConfig:
    """Settings shared by every env flavour.

    Attributes:
        action_mode: ``"delta"`` (bounded change of the previous steer), ``"residual"`` (bounded
            correction of the teacher's action) or ``"absolute"``.
        max_delta: steer change (delta) or correction (residual) at |a| = 1.
        end_step: the episode ends before this step (500: the end of the cost window).
        observation: ``"basic"`` or ``"rich"`` (see :mod:`~ppo_training.environment.features`).
        prediction: add the model's expected next lateral acceleration to the observation (one
            more model call per step; ``rich`` only).
        correction: gain of the fixed model correction added to every steer,
            ``correction * (current - predicted next)`` (needs ``prediction``; 0 disables).
    """

    action_mode: str = "delta"
    max_delta: float = 0.25
    end_step: int = COST_END_IDX
    observation: str = "basic"
    prediction: bool = False
    correction: float = 0.0

    def __post_init__(self) -> None:
        if self.action_mode not in ("delta", "residual", "absolute"):
            raise ValueError(f"action_mode must be 'delta', 'residual' or 'absolute', got {self.action_mode!r}")
        obs_dim(self.observation, self.prediction)  # validates the combination
        if self.correction and not self.prediction:
            raise ValueError("env correction needs the model prediction (prediction: true)")

    @classmethod
    def from_config(cls, cfg: dict) -> "EnvConfig":
        """The env settings of a full config dict (``cfg["env"]``; older configs lack the newer keys)."""
        e = cfg["env"]
        return cls(action_mode=e["action_mode"], max_delta=float(e["max_delta"]),
                   observation=e.get("observation", "basic"), prediction=bool(e.get("prediction", False)),
                   correction=float(e.get("correction", 0.0)))

    @property
    def obs_dim(self) -> int:
        return obs_dim(self.observation, self.prediction)

    def new_features(self, batch_size: int, xp=np) -> FeatureState:
        """A fresh :class:`FeatureState` of this observation kind."""
        return FeatureState(batch_size, xp=xp, kind=self.observation, prediction=self.prediction)
        if not CONTROL_START_IDX < self.end_step <= COST_END_IDX:
            raise ValueError(f"end_step must be in ({CONTROL_START_IDX}, {COST_END_IDX}], got {self.end_step}")


def action_to_steer(a, features: FeatureState, cfg: EnvConfig):
    """Steer (float64 ``[B]``) of normalised actions ``a`` in [-1, 1] under ``cfg``."""
    return features_action_to_steer(a, features.last_action, cfg.action_mode, cfg.max_delta, features.teacher,
                                    xp=features.xp, offset=model_correction(features, cfg.correction))


def observe(features: FeatureState, inputs: ControlInputs):
    """Observation of one control call (advances the feature state); arrays of the backend.

    The model prediction (when the features use it) is skipped during the warm-up, whose outputs
    the simulator discards.
    """
    n, xp = inputs.future_length, features.xp
    rich = features.kind == "rich"
    predict = inputs._sim.backend.predict_next if features.prediction and not inputs.warmup else None
    return features.observe(
        inputs.target, inputs.current, inputs.roll_lataccel, inputs.v_ego, inputs.a_ego,
        pad_plan(inputs.future_lataccel, n, inputs.target, xp),
        pad_plan(inputs.future_roll_lataccel, n, inputs.roll_lataccel, xp),
        pad_plan(inputs.future_v_ego, n, inputs.v_ego, xp),
        pad_plan(inputs.future_a_ego, n, inputs.a_ego, xp) if rich else None,
        predict=predict,
    )


class LockstepEpisodes:
    """B episodes that start together and end together (the rollout core of both env kinds).

    Episodes all have ``end_step - 100`` policy steps, so a batch of them stays in lockstep and
    one model call serves every row.
    """

    def __init__(self, backend: ModelBackend, cfg: EnvConfig) -> None:
        self.backend = backend
        self.cfg = cfg
        self.sim: BatchedSimulator | None = None

    def start(self, segments: Sequence[Segment]) -> np.ndarray:
        """Begin episodes on ``segments``; fast-forward the warm-up; observation ``[B, OBS_DIM]``."""
        self.sim = BatchedSimulator(self.backend, segments)
        self.features = self.cfg.new_features(len(segments), xp=self.backend.xp)
        inputs = self.sim.reset()
        while inputs.warmup:
            observe(self.features, inputs)
            # The harness discards warm-up outputs; the teacher's stands in as "our" output.
            self.features.record(self.features.teacher)
            inputs = self.sim.step(self.features.teacher)
        return observe(self.features, inputs)

    def step(self, a):
        """Apply normalised actions; returns (next observation or None at the end, rewards, done).

        Observations and rewards are arrays of the backend (numpy, or torch on its device).
        """
        sim = self.sim
        i = sim.step_idx
        steer = action_to_steer(a, self.features, self.cfg)
        self.features.record(steer)
        prev = sim.current
        inputs = sim.step(steer)
        pred = sim.current
        target = sim.target[:, i]
        reward = -LAT_WEIGHT * (target - pred) ** 2
        if i > CONTROL_START_IDX:
            reward = reward - JERK_WEIGHT * (pred - prev) ** 2
        done = sim.step_idx >= self.cfg.end_step
        if done:
            return None, reward, True
        return observe(self.features, inputs), reward, False

    def costs(self) -> dict[str, np.ndarray]:
        return self.sim.result().costs if self.sim.step_idx >= COST_END_IDX else {}


class SegmentPool:
    """The env's file list with loaded segments cached in memory."""

    def __init__(self, files: Sequence[str | Path]) -> None:
        self.files = [str(f) for f in files]
        if not self.files:
            raise ValueError("the environment needs at least one segment file")
        self._cache: dict[str, Segment] = {}

    def get(self, index: int) -> Segment:
        path = self.files[index]
        seg = self._cache.get(path)
        if seg is None:
            seg = self._cache[path] = load_segment(path)
        return seg


def _final_info(costs: dict[str, np.ndarray], paths: list[str], row: int) -> dict:
    return {"segment": paths[row], **{k: float(v[row]) for k, v in costs.items()}}


class LateralControlEnv(gym.Env):
    """One segment per episode; see the module docstring for observation, action and reward.

    Args:
        files: segment CSV paths to draw episodes from (uniformly, with the env's seeded RNG).
        model_path: TinyPhysics ONNX model (default: the project's).
        backend: a ready model backend (overrides ``model_path``).
        config: :class:`EnvConfig`.
    """

    metadata = {"render_modes": []}

    def __init__(self, files: Sequence[str | Path], model_path: str | Path | None = None,
                 backend: ModelBackend | None = None, config: EnvConfig | None = None) -> None:
        self.pool = SegmentPool(files)
        self.cfg = config or EnvConfig()
        self.backend = backend or make_backend("onnx", model_path, threads=1)
        self.core = LockstepEpisodes(self.backend, self.cfg)
        self.observation_space = spaces.Box(-np.inf, np.inf, (self.cfg.obs_dim,), np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)
        self._done = True

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        index = int(self.np_random.integers(len(self.pool.files)))
        if options and "file_index" in options:
            index = int(options["file_index"])
        seg = self.pool.get(index)
        obs = self.core.start([seg])
        self._done = False
        return obs[0], {"segment": seg.path}

    def step(self, action):
        if self._done:
            raise RuntimeError("episode is over; call reset()")
        obs, reward, done = self.core.step(action)
        info: dict = {}
        if done:
            self._done = True
            costs = self.core.costs()
            info = _final_info(costs, self.core.sim.paths, 0) if costs else {"segment": self.core.sim.paths[0]}
            obs = np.zeros(self.cfg.obs_dim, np.float32) if obs is None else obs
            return obs if obs.ndim == 1 else obs[0], float(reward[0]), True, False, info
        return obs[0], float(reward[0]), False, False, info


class VectorizedLateralControlEnv(VectorEnv):
    """``num_envs`` episodes over one batched simulator; same results as that many single envs.

    Row k draws its files with the RNG a :class:`LateralControlEnv` reset with ``seed + k`` would
    use, so its observations, rewards and infos equal that single env's.  With ``paired=True``
    rows 2k and 2k+1 drive the segment drawn for row 2k (for paired advantage estimates).

    Args:
        files: segment CSV paths.
        num_envs: rows stepped together.
        weights: draw probability of each file (default: uniform).
        model_path / backend / config: as for :class:`LateralControlEnv` (the backend here uses
            all cores by default).
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, files: Sequence[str | Path], num_envs: int, model_path: str | Path | None = None,
                 backend: ModelBackend | None = None, config: EnvConfig | None = None,
                 paired: bool = False, weights: Sequence[float] | None = None) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be at least 1, got {num_envs}")
        if paired and num_envs % 2:
            raise ValueError(f"paired rows need an even num_envs, got {num_envs}")
        self.paired = paired
        self.num_envs = num_envs
        self.pool = SegmentPool(files)
        self.weights = None
        if weights is not None:
            w = np.asarray(weights, dtype=np.float64)
            if w.shape != (len(self.pool.files),) or (w < 0).any() or not np.isclose(w.sum(), 1.0):
                raise ValueError(f"weights must be {len(self.pool.files)} non-negative draw probabilities summing to 1")
            self.weights = w / w.sum()
        self.cfg = config or EnvConfig()
        self.backend = backend or make_backend("onnx", model_path)
        self.core = LockstepEpisodes(self.backend, self.cfg)
        self.single_observation_space = spaces.Box(-np.inf, np.inf, (self.cfg.obs_dim,), np.float32)
        self.single_action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._rngs: list[np.random.Generator] | None = None

    def _start(self) -> tuple[np.ndarray, dict]:
        # Saved in checkpoints: restoring these and calling reset() restarts the same episodes.
        self._episode_rng_states = [rng.bit_generator.state for rng in self._rngs]
        n = len(self.pool.files)
        segs = [self.pool.get(int(rng.integers(n) if self.weights is None else rng.choice(n, p=self.weights)))
                for rng in self._rngs]
        if self.paired:  # rows 2k and 2k+1 drive the same segment (same simulator noise)
            segs = [segs[k - k % 2] for k in range(self.num_envs)]
        obs = self.core.start(segs)
        info = {"segment": np.array([s.path for s in segs], dtype=object),
                "_segment": np.ones(self.num_envs, dtype=bool)}
        return obs, info

    def reset(self, *, seed: int | list[int] | None = None, options: dict | None = None):
        if seed is None and self._rngs is None:
            seed = int(np.random.SeedSequence().entropy % 2**31)
        if seed is not None:
            seeds = seed if isinstance(seed, (list, tuple)) else [seed + k for k in range(self.num_envs)]
            self._rngs = [gym.utils.seeding.np_random(s)[0] for s in seeds]
        return self._start()

    def restore_episode_rngs(self, states: list[dict]) -> None:
        """Set the file-drawing RNGs to saved states (the next reset() redraws those episodes)."""
        if len(states) != self.num_envs:
            raise ValueError(f"{len(states)} RNG states for {self.num_envs} envs")
        self._rngs = [np.random.Generator(np.random.PCG64()) for _ in states]
        for rng, state in zip(self._rngs, states):
            rng.bit_generator.state = state

    def step(self, actions):
        if self.core.sim is None:
            raise RuntimeError("call reset() before step()")
        obs, reward, done = self.core.step(actions)
        terminated = np.full(self.num_envs, done)
        truncated = np.zeros(self.num_envs, dtype=bool)
        infos: dict = {}
        if done:
            costs = self.core.costs()
            paths = self.core.sim.paths
            final_obs = np.zeros((self.num_envs, self.cfg.obs_dim), np.float32)  # not used: episodes end by time
            for k in range(self.num_envs):
                infos = self._add_info(infos, {"final_obs": final_obs[k], "final_info": _final_info(costs, paths, k)}, k)
            obs, reset_info = self._start()
            infos.update(reset_info)
        return obs, reward, terminated, truncated, infos

    def close_extras(self, **kwargs) -> None:
        self.core.sim = None


def make_async_env(files: Sequence[str | Path], n_envs: int, model_path: str | Path | None = None,
                   config: EnvConfig | None = None, start_method: str = "forkserver") -> gym.vector.AsyncVectorEnv:
    """``AsyncVectorEnv`` of :class:`LateralControlEnv` workers (one model session each).

    Args:
        start_method: ``fork``, ``spawn`` or ``forkserver`` (multiprocessing context).
    """
    if start_method not in ("fork", "spawn", "forkserver"):
        raise ValueError(f"start_method must be fork, spawn or forkserver, got {start_method!r}")
    files = [str(f) for f in files]
    cfg = config or EnvConfig()

    def make():
        return LateralControlEnv(files, model_path=model_path, config=cfg)

    return GuardedAsyncVectorEnv([make] * n_envs, context=start_method,
                                 autoreset_mode=AutoresetMode.SAME_STEP, step_timeout_s=60.0)


class WorkerDiedError(RuntimeError):
    """An async environment worker exited or stopped answering."""


class GuardedAsyncVectorEnv(gym.vector.AsyncVectorEnv):
    """``AsyncVectorEnv`` whose dead or stuck workers surface as :class:`WorkerDiedError`.

    A killed worker shows up as a broken pipe or end-of-file on its pipe; a worker that stops
    answering hits ``step_timeout_s``.  Either way the caller gets an error naming the worker
    instead of a hang.  Errors raised inside a worker's simulator are re-raised by gymnasium.
    """

    def __init__(self, *args, step_timeout_s: float = 60.0, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.step_timeout_s = step_timeout_s

    def _dead_workers(self) -> str:
        dead = [f"{k} (pid {p.pid}, exit code {p.exitcode})" for k, p in enumerate(self.processes) if not p.is_alive()]
        return ", ".join(dead) or "none exited; a worker stopped answering"

    def step(self, actions):
        try:
            self.step_async(actions)
            return self.step_wait(timeout=self.step_timeout_s)
        except (BrokenPipeError, EOFError, ConnectionResetError, mp.TimeoutError) as exc:
            raise WorkerDiedError(f"async environment worker died: {self._dead_workers()} ({type(exc).__name__})") from exc

    def reset(self, *, seed=None, options=None):
        try:
            self.reset_async(seed=seed, options=options)
            return self.reset_wait(timeout=self.step_timeout_s)
        except (BrokenPipeError, EOFError, ConnectionResetError, mp.TimeoutError) as exc:
            raise WorkerDiedError(f"async environment worker died: {self._dead_workers()} ({type(exc).__name__})") from exc
