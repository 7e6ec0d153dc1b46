"""Observation features: the rich observation, the model prediction and the model correction."""
from __future__ import annotations

import numpy as np
import pytest

from ppo_training.controllers.policy import TeacherController
from ppo_training.data import list_segment_files, load_segments
from ppo_training.environment import EnvConfig, VectorizedLateralControlEnv
from ppo_training.environment.features import HISTORY, PLAN_STEPS, RICH_DIM, obs_dim
from ppo_training.environment.lateral_env import observe
from ppo_training.evaluation import evaluate
from ppo_training.sim.engine import BatchedSimulator
from ppo_training.sim.prediction import OnnxPredictor

RICH = EnvConfig(action_mode="residual", observation="rich", prediction=True)


class Recorder(TeacherController):
    """The teacher, keeping every control step's observation and feature state."""

    def __init__(self, cfg: EnvConfig) -> None:
        self.cfg = cfg
        self.log: list[dict] = []

    def __call__(self, inputs):
        f = self._features(inputs)
        obs = observe(f, inputs)
        if not inputs.warmup:
            self.log.append({"step": inputs.step, "obs": np.array(obs), "predicted": f.predicted.copy(),
                             "inputs": tuple(np.array(x) for x in f.prediction_inputs()),
                             "current": np.array(inputs.current), "plan": np.array(inputs.future_lataccel)})
        f.record(f.teacher)
        return f.teacher


@pytest.fixture()
def segments(in_data_dir):
    return load_segments(list_segment_files("data")[:4])


def test_observation_sizes():
    assert obs_dim("basic") == 27
    assert obs_dim("rich") == RICH_DIM == 8 + 2 * HISTORY + 4 * PLAN_STEPS
    assert obs_dim("rich", prediction=True) == RICH_DIM + 2
    with pytest.raises(ValueError, match="rich"):
        obs_dim("basic", prediction=True)
    with pytest.raises(ValueError, match="observation kind"):
        obs_dim("fancy")
    with pytest.raises(ValueError, match="prediction"):
        EnvConfig(correction=0.1)


def test_rich_observation_holds_histories_and_plans(segments, onnx_backend):
    rec = Recorder(RICH)
    BatchedSimulator(onnx_backend, segments).rollout(rec)
    first, later = rec.log[0], rec.log[30]
    obs = later["obs"]
    assert obs.shape == (4, RICH_DIM + 2) and obs.dtype == np.float32
    np.testing.assert_allclose(obs[:, 1], later["current"] * 0.5, rtol=1e-6)
    # the last 20 lateral accelerations shown end with the current one
    np.testing.assert_allclose(obs[:, 8 + 2 * HISTORY - 1], later["current"] * 0.5, rtol=1e-6)
    # the plan section holds the 49 future targets
    np.testing.assert_allclose(obs[:, 8 + 2 * HISTORY : 8 + 2 * HISTORY + PLAN_STEPS], later["plan"] * 0.5, rtol=1e-6)
    # the controller's own outputs, oldest first: 30 steps later they have moved by 30 places
    hist_then = first["obs"][:, 8 : 8 + HISTORY]
    assert not np.allclose(hist_then, obs[:, 8 : 8 + HISTORY])


def test_prediction_is_the_same_for_the_harness_and_batched_evaluation(segments, onnx_backend, model_path):
    """The exported controller's batch-1 predictor and the batched backend give identical numbers."""
    rec = Recorder(RICH)
    BatchedSimulator(onnx_backend, segments).rollout(rec)
    single = OnnxPredictor(model_path)
    for entry in rec.log[::97]:
        actions, states, lataccels = entry["inputs"]
        for b in range(len(segments)):
            mean, std = single(actions[b : b + 1], states[b : b + 1], lataccels[b : b + 1], entry["current"][b : b + 1])
            batched_mean, batched_std = onnx_backend.predict_next(actions, states, lataccels, entry["current"])
            assert mean[0] == batched_mean[b] and std[0] == batched_std[b]


def test_prediction_forecasts_the_next_lateral_acceleration(segments, onnx_backend):
    """The model's expected next value beats persistence (next = current) on real rollouts."""
    rec = Recorder(RICH)
    res = BatchedSimulator(onnx_backend, segments).rollout(rec, keep_histories=True)
    err_pred, err_persist = [], []
    for entry in rec.log[:-1]:
        i = entry["step"]
        realised = np.array([h[i] for h in res.current])
        err_pred.append(entry["predicted"] - realised)
        err_persist.append(entry["current"] - realised)
    rmse = lambda e: float(np.sqrt(np.mean(np.square(e))))  # noqa: E731
    assert rmse(err_pred) < 0.9 * rmse(err_persist), (rmse(err_pred), rmse(err_persist))


def test_rich_observation_rows_do_not_depend_on_the_batch(segments, onnx_backend):
    full = Recorder(RICH)
    BatchedSimulator(onnx_backend, segments).rollout(full)
    one = Recorder(RICH)
    BatchedSimulator(onnx_backend, segments[2:3]).rollout(one)
    for a, b in zip(full.log, one.log):
        assert np.array_equal(a["obs"][2], b["obs"][0])


def test_model_correction_through_the_env_equals_the_corrected_teacher(in_data_dir, onnx_backend):
    files = list_segment_files("data")[:3]
    cfg = EnvConfig(action_mode="residual", observation="rich", prediction=True, correction=0.1)
    env = VectorizedLateralControlEnv(files, 3, backend=onnx_backend, config=cfg)
    env.reset(seed=0)
    segs = list(env.core.sim.paths)
    while True:
        _obs, _r, term, _trunc, info = env.step(np.zeros((3, 1), np.float32))
        if term.all():
            break
    env_costs = np.asarray(info["final_info"]["total_cost"])
    direct = evaluate(TeacherController(correction=0.1), segs, backend=onnx_backend, progress=False).table
    plain = evaluate(TeacherController(), segs, backend=onnx_backend, progress=False).table
    np.testing.assert_array_equal(env_costs, direct["total_cost"].to_numpy())
    assert not np.array_equal(env_costs, plain["total_cost"].to_numpy())  # the correction does steer
