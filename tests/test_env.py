"""Gymnasium environments: checker, reward = -cost, vector == N single envs, async workers."""
from __future__ import annotations

import os
import signal
import time

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from ppo_training.controllers.policy import TeacherController
from ppo_training.data import list_segment_files
from ppo_training.environment import (
    OBS_DIM,
    EnvConfig,
    LateralControlEnv,
    VectorizedLateralControlEnv,
    make_async_env,
)
from ppo_training.environment.lateral_env import WorkerDiedError
from ppo_training.evaluation import evaluate


@pytest.fixture()
def files(in_data_dir):
    return list_segment_files("data")


def test_single_env_passes_checker(files, onnx_backend):
    env = LateralControlEnv(files, backend=onnx_backend)
    check_env(env, skip_render_check=True)


def test_vector_env_api(files, onnx_backend):
    """gymnasium has no checker for vector envs: the VectorEnv contract is checked here, and each
    row's equality with a checked single env is tested below."""
    env = VectorizedLateralControlEnv(files, 3, backend=onnx_backend)
    assert isinstance(env, gym.vector.VectorEnv)
    assert env.metadata["autoreset_mode"] == gym.vector.AutoresetMode.SAME_STEP
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs) and obs.shape == (3, OBS_DIM)
    again, _ = env.reset(seed=0)
    assert np.array_equal(obs, again)  # seeded resets are reproducible
    env.action_space.seed(0)
    obs, rew, term, trunc, info = env.step(env.action_space.sample())
    assert env.observation_space.contains(obs)
    assert rew.shape == term.shape == trunc.shape == (3,) and term.dtype == trunc.dtype == bool
    assert env.single_action_space.shape == (1,) and env.action_space.shape == (3, 1)


@pytest.mark.parametrize("mode", ["delta", "residual", "absolute"])
def test_return_equals_minus_total_cost(files, onnx_backend, mode):
    env = LateralControlEnv(files, backend=onnx_backend, config=EnvConfig(action_mode=mode))
    rng = np.random.default_rng(0)
    for seed in (1, 2):
        env.reset(seed=seed)
        ret, steps = 0.0, 0
        while True:
            _obs, r, term, trunc, info = env.step(rng.uniform(-0.2, 0.2, 1).astype(np.float32))
            ret += r
            steps += 1
            if term or trunc:
                break
        assert steps == 400 and term and not trunc
        assert ret == pytest.approx(-info["total_cost"], rel=1e-9)
        # the simulator's own cost of the same actions agrees with the info
        assert set(info) >= {"lataccel_cost", "jerk_cost", "total_cost", "segment"}


def test_teacher_through_env_matches_engine(files, onnx_backend):
    """Driving the env with the teacher's actions reproduces the teacher controller's costs."""
    from ppo_training.policy.behavior_cloning import teacher_action

    cfg = EnvConfig()
    env = VectorizedLateralControlEnv(files, 8, backend=onnx_backend, config=cfg)
    obs, info = env.reset(seed=0)
    segs = list(info["segment"])
    while True:
        obs, r, term, trunc, info = env.step(teacher_action(obs, cfg.action_mode, cfg.max_delta))
        if term.all():
            break
    got = np.asarray(info["final_info"]["total_cost"])
    want = evaluate(TeacherController(), segs, backend=onnx_backend, progress=False).table["total_cost"].to_numpy()
    # the env's actions pass through float32 observations, so they differ from the teacher's by rounding
    np.testing.assert_allclose(got, want, rtol=2e-2)


def test_vector_env_equals_single_envs(files, onnx_backend):
    n = 3
    venv = VectorizedLateralControlEnv(files, n, backend=onnx_backend)
    singles = [LateralControlEnv(files, backend=onnx_backend) for _ in range(n)]
    obs, info = venv.reset(seed=10)
    s_obs = [s.reset(seed=10 + k)[0] for k, s in enumerate(singles)]
    assert np.array_equal(obs, np.stack(s_obs))
    rng = np.random.default_rng(0)
    endings = 0
    for _ in range(801):  # two whole episodes and one step into the third
        a = rng.uniform(-0.3, 0.3, (n, 1)).astype(np.float32)
        obs, r, term, trunc, info = venv.step(a)
        for k, s in enumerate(singles):
            o, rk, tk, _tr, ik = s.step(a[k])
            assert rk == r[k] and tk == term[k]
            if tk:
                assert info["final_info"]["total_cost"][k] == ik["total_cost"]
                assert info["final_info"]["segment"][k] == ik["segment"]
                o, _ = s.reset()
                endings += 1
            assert np.array_equal(obs[k], o)
    assert endings == 2 * n


def test_async_env_runs_and_matches(files, model_path):
    env = make_async_env(files, 2, model_path=model_path, start_method="fork")
    try:
        obs, _ = env.reset(seed=5)
        single = [LateralControlEnv(files, model_path=model_path) for _ in range(2)]
        s_obs = np.stack([s.reset(seed=5 + k)[0] for k, s in enumerate(single)])
        assert np.array_equal(obs, s_obs)
        for _ in range(400):
            obs, r, term, trunc, info = env.step(np.zeros((2, 1), np.float32))
        assert term.all() and "final_info" in info
    finally:
        env.close()


@pytest.mark.parametrize("start_method", ["fork", "forkserver"])
def test_async_worker_death_is_a_clear_error(files, model_path, start_method):
    env = make_async_env(files, 2, model_path=model_path, start_method=start_method)
    try:
        env.reset(seed=0)
        os.kill(env.processes[0].pid, signal.SIGKILL)
        time.sleep(0.2)
        t0 = time.time()
        with pytest.raises(WorkerDiedError, match="worker died: 0"):
            for _ in range(5):
                env.step(np.zeros((2, 1), np.float32))
        assert time.time() - t0 < 10
    finally:
        try:
            env.close(terminate=True)
        except Exception:
            pass


def test_obs_identical_for_batch_sizes(files, onnx_backend):
    """Features are row-wise: the same segment gives the same observations in any batch."""
    a = VectorizedLateralControlEnv(files[:1], 1, backend=onnx_backend)
    b = VectorizedLateralControlEnv(files[:1], 4, backend=onnx_backend)
    oa, _ = a.reset(seed=0)
    ob, _ = b.reset(seed=0)
    for _ in range(50):
        assert np.array_equal(np.repeat(oa, 4, 0), ob)
        oa, *_ = a.step(np.full((1, 1), 0.1, np.float32))
        ob, *_ = b.step(np.full((4, 1), 0.1, np.float32))


def test_paired_rows_share_segment_and_noise(files, onnx_backend):
    env = VectorizedLateralControlEnv(files, 4, backend=onnx_backend, paired=True)
    obs, info = env.reset(seed=3)
    assert info["segment"][0] == info["segment"][1] and info["segment"][2] == info["segment"][3]
    for _ in range(30):  # same actions in both rows of a pair: identical trajectories (same seed)
        a = np.repeat(np.random.default_rng(0).uniform(-0.5, 0.5, (2, 1)), 2, axis=0).astype(np.float32)
        obs, r, *_ = env.step(a)
        assert np.array_equal(obs[0], obs[1]) and r[2] == r[3]
    with pytest.raises(ValueError, match="even"):
        VectorizedLateralControlEnv(files, 3, backend=onnx_backend, paired=True)
