"""Batched TinyPhysics rollout engine: N segments advance in lockstep, one model call per step.

The semantics are those of the official simulator (SPEC.md), step by step:

* reset: step 20; histories hold the first 20 rows; the current lateral acceleration history starts
  as a copy of the targets; the actions are the logged steer.
* step ``i``: the controller sees ``(target[i], current, state[i], future plan rows i+1..i+49)``;
  before step 100 its action is replaced by the logged steer; the action is clipped to [-2, 2];
  the model samples the next lateral acceleration, clipped to ±0.5 of the current one.  Before
  step 100 the sampled value is discarded and ``current = target[i]``.

Exactness and speed:

* each segment has its own ``numpy.random.RandomState(seed)`` and draws one uniform per step, so a
  segment's rollout does not depend on batch size or order.  All draws are taken at reset
  (``random_sample(n)`` yields the same stream as n single draws) and moved to the backend once.
* during warm-up the model's sample is discarded, so its call is skipped; the uniform it would
  have consumed is still used up (its column of the pre-drawn table is simply never read).
* only steps 100-499 decide the score, so a cost-only run stops at step 500 (``full=False``);
  ``full=True`` runs every row for plots.
* segments of different lengths share a batch: the data is edge-padded to the longest one and
  each segment's results are cut at its own length.
"""
from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from ..constants import CONTEXT_LENGTH, CONTROL_START_IDX, COST_END_IDX, MAX_ACC_DELTA, STEER_RANGE
from ..data.segments import Segment
from .backends import Array, ModelBackend
from .control import PLAN, BatchedController, ControlInputs
from .costs import compute_costs

@functools.lru_cache(maxsize=None)
def uniform_draws(seed: int, n: int) -> np.ndarray:
    """The first ``n`` uniforms of ``RandomState(seed)`` (read-only; cached: seeds are < 10,000).

    Building a large batch draws the same few thousand streams again and again (a training batch
    repeats its files; tiled benchmark batches repeat seeds), so each is drawn once per process.
    """
    with _DRAW_LOCK:  # reseeding one generator is ~15x cheaper than building one per seed
        _DRAW_STATE.seed(seed)
        draws = _DRAW_STATE.random_sample(n)
    draws.flags.writeable = False
    return draws


_DRAW_STATE = np.random.RandomState(0)
_DRAW_LOCK = threading.Lock()

@dataclass
class RolloutResult:
    """Outcome of a batched rollout, on the host.

    Attributes:
        paths: segment path strings (seed keys), in batch order.
        costs: ``lataccel_cost``, ``jerk_cost``, ``total_cost`` float64 ``[B]``.
        target, current, action: per-segment float64 histories, each cut at the last simulated
            step of that segment (length 500 for a cost-only run, the segment's rows otherwise).
    """

    paths: list[str]
    costs: dict[str, np.ndarray]
    target: list[np.ndarray] = field(default_factory=list)
    current: list[np.ndarray] = field(default_factory=list)
    action: list[np.ndarray] = field(default_factory=list)


class BatchedSimulator:
    """Steps ``B`` segments in lockstep over one :class:`ModelBackend`.

    Args:
        backend: model and array framework.
        segments: the segments (any lengths >= 500); each keeps its own seed from its path.
        full: run every row (True) or stop after step 499, the end of the cost window (False).

    Use :meth:`rollout` with a batched controller, or drive it step by step:
    ``inputs = sim.reset()``, then ``inputs = sim.step(actions)`` until ``sim.done``.
    """

    def __init__(self, backend: ModelBackend, segments: Sequence[Segment], full: bool = False) -> None:
        if not segments:
            raise ValueError("BatchedSimulator needs at least one segment")
        self.backend = backend
        self.segments = list(segments)
        self.paths = [s.path for s in self.segments]
        self.lengths = np.array([s.n_rows for s in self.segments], dtype=np.int64)
        self.batch_size = len(self.segments)
        self.full = full
        self.end_step = int(self.lengths.max()) if full else COST_END_IDX
        t_max = int(self.lengths.max())
        padded = t_max + PLAN  # room for the plan of the last step

        # Rows that drive the same segment data (a training batch repeats its files, paired rows
        # share theirs, benchmark tiles share arrays) are laid out once on the host and gathered
        # into the batch by the backend (on the device for a GPU backend): little host work and
        # a small host-to-device copy even for very large batches.
        unique: dict[tuple[int, ...], int] = {}
        first: list[Segment] = []
        row_of = np.empty(self.batch_size, dtype=np.int64)
        for b, seg in enumerate(self.segments):
            key = (id(seg.target_lataccel), id(seg.roll_lataccel), id(seg.v_ego), id(seg.a_ego),
                   id(seg.steer_command))
            j = unique.get(key)
            if j is None:
                j = unique[key] = len(first)
                first.append(seg)
            row_of[b] = j
        u_lengths = np.array([s.n_rows for s in first], dtype=np.int64)
        groups = [(int(n), np.flatnonzero(u_lengths == n)) for n in np.unique(u_lengths)]

        def column(name: str, width: int) -> np.ndarray:
            out = np.empty((len(first), width), dtype=np.float64)
            for n, rows in groups:  # segments of equal length: one block copy each
                block = np.stack([getattr(first[k], name) for k in rows])
                out[rows, :n] = block
                out[rows, n:] = block[:, -1:]  # edge padding past a segment's end
            return out

        to = backend.asarray
        gather = to(row_of)
        target = column("target_lataccel", padded)
        roll, v, a = column("roll_lataccel", padded), column("v_ego", padded), column("a_ego", padded)
        steer = column("steer_command", t_max)
        self.target, self.roll_lataccel = to(target)[gather], to(roll)[gather]
        self.v_ego, self.a_ego = to(v)[gather], to(a)[gather]
        self.logged_steer = to(steer)[gather]
        # Model input columns 1..3 never change: keep them in float32 once.
        self._static_f32 = to(np.stack([roll, v, a], axis=-1).astype(np.float32))[gather]
        # One uniform per step and segment, the official stream of RandomState(seed); rows with
        # equal seeds share it.
        seeds = np.array([s.seed for s in self.segments], dtype=np.int64)
        u_seeds, seed_row = np.unique(seeds, return_inverse=True)
        draws = np.stack([uniform_draws(int(s), t_max - CONTEXT_LENGTH) for s in u_seeds])
        self._uniforms = to(draws)[to(seed_row.reshape(-1).astype(np.int64))]
        self._t_max = t_max
        self.step_idx = CONTEXT_LENGTH

    # -- stepping -----------------------------------------------------------------------------------
    def reset(self) -> ControlInputs:
        """Back to step 20 with the logged history; returns the inputs of the first control call."""
        be, b, t = self.backend, self.batch_size, self._t_max
        self.action_history = be.zeros((b, t), "float64")
        self.current_history = be.zeros((b, t), "float64")
        self.token_history = be.zeros((b, t), "int64")
        self.action_history[:, :CONTEXT_LENGTH] = self.logged_steer[:, :CONTEXT_LENGTH]
        self.current_history[:, :CONTEXT_LENGTH] = self.target[:, :CONTEXT_LENGTH]
        self.token_history[:, :CONTEXT_LENGTH] = be.encode(self.target[:, :CONTEXT_LENGTH])
        self.current = self.target[:, CONTEXT_LENGTH - 1]
        self._states = be.zeros((b, CONTEXT_LENGTH, 4), "float32")
        self.step_idx = CONTEXT_LENGTH
        return ControlInputs(self, self.step_idx)

    @property
    def done(self) -> bool:
        return self.step_idx >= self.end_step

    def inputs(self) -> ControlInputs:
        """The controller inputs of the current step."""
        return ControlInputs(self, self.step_idx)

    def step(self, actions: Array) -> ControlInputs | None:
        """Apply the controller's actions (float ``[B]`` steer) and advance one step.

        Returns the inputs of the next step, or None when the run is done.
        """
        if self.done:
            raise RuntimeError("rollout is finished; call reset()")
        be, i = self.backend, self.step_idx
        if i < CONTROL_START_IDX:
            actions = self.logged_steer[:, i]
        self.action_history[:, i] = be.clip(actions, STEER_RANGE[0], STEER_RANGE[1])
        if i < CONTROL_START_IDX:
            # The sample would be discarded: skip the model call; its uniform stays unused.
            new = self.target[:, i]
        else:
            lo = i - CONTEXT_LENGTH + 1
            self._states[:, :, 0] = self.action_history[:, lo : i + 1]
            self._states[:, :, 1:] = self._static_f32[:, lo : i + 1]
            tokens = self.token_history[:, i - CONTEXT_LENGTH : i]
            sampled = be.sample(self._states, tokens, self._uniforms[:, i - CONTEXT_LENGTH])
            new = be.clip(be.decode(sampled), self.current - MAX_ACC_DELTA, self.current + MAX_ACC_DELTA)
        self.current_history[:, i] = new
        self.token_history[:, i] = be.encode(new)
        self.current = self.current_history[:, i]
        self.step_idx = i + 1
        return None if self.done else ControlInputs(self, self.step_idx)

    # -- whole runs -----------------------------------------------------------------------------------
    def rollout(
        self,
        controller: BatchedController,
        progress: Callable[[int], None] | None = None,
        keep_histories: bool = False,
    ) -> RolloutResult:
        """Run all segments to the end with a batched controller.

        Args:
            controller: called once per step with the :class:`ControlInputs`, warm-up included.
            progress: called with 1 after each step (e.g. ``tqdm.update``).
            keep_histories: also return target / current / action histories for plots.
        """
        controller.reset(self.batch_size)
        inputs = self.reset()
        while inputs is not None:
            inputs = self.step(controller(inputs))
            if progress is not None:
                progress(1)
        return self.result(keep_histories)

    def result(self, keep_histories: bool = False) -> RolloutResult:
        """Costs (and optionally histories) of the steps simulated so far; needs step >= 500."""
        n = self.step_idx
        target = self.backend.to_numpy(self.target[:, :n])
        current = self.backend.to_numpy(self.current_history[:, :n])
        costs = compute_costs(target, current)
        res = RolloutResult(paths=list(self.paths), costs=costs)
        if keep_histories:
            action = self.backend.to_numpy(self.action_history[:, :n])
            for b in range(self.batch_size):
                m = min(n, int(self.lengths[b]))
                res.target.append(target[b, :m].copy())
                res.current.append(current[b, :m].copy())
                res.action.append(action[b, :m].copy())
        return res
