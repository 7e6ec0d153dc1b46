"""Behaviour-cloning warm start: fit the actor to the teacher's actions by likelihood.

The teacher (PID + feedforward) and the previous steer output are part of the environment's
feature state, so the teacher's normalised action follows from them:
``a = (teacher - previous) / max_delta`` in delta mode, ``teacher / 2`` in absolute mode and 0 in
residual mode (the teacher is the zero correction).  The critic is fitted to the teacher's
discounted (scaled) returns at the same time, so PPO starts with a value function that matches
the policy it starts from.

Loss: the negative log-likelihood of the teacher's action with the spread held fixed (for the
mean that is a scaled squared error).  With ``bc.learn_std`` the squashed Gaussian's spread is then
set to its likelihood optimum for the fitted mean, the RMS of the clone's raw-action errors
(floored at ``bc.min_log_std``), so PPO starts with a spread matched to how well the clone
reproduces the teacher instead of a hand-set one.

The executed actions are the teacher's plus Gaussian noise (``bc.noise``, normalised units) while
the labels stay the clean teacher actions: a delta-action policy cloned only on the teacher's own
states never learns to correct a steer that has drifted from the teacher's, and its small errors
then add up step after step.
"""
from __future__ import annotations

import numpy as np
import torch

from ..constants import STEER_RANGE
from ..environment.features import N_PREV_ACTIONS, OBS_DIM
from .actor_critic import ActorCritic
from .ppo_agent import minibatch_order

# Where the basic observation holds the teacher's action and the previous output (async envs,
# whose feature state lives in worker processes, are labelled from these).
TEACHER_INDEX = OBS_DIM - 1
LAST_ACTION_INDEX = 7 + N_PREV_ACTIONS - 1


def _host(x) -> np.ndarray:
    """A numpy copy of a numpy array or a torch tensor (the warm start runs on the host)."""
    return x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)


def normalised_teacher(teacher: np.ndarray, last: np.ndarray, action_mode: str, max_delta: float) -> np.ndarray:
    """Normalised action ``[B, 1]`` in [-1, 1] that makes the env steer like the teacher."""
    if action_mode == "delta":
        a = (teacher - last) / max_delta
    elif action_mode == "residual":
        a = np.zeros_like(teacher)  # the teacher itself is the zero correction
    else:
        a = teacher / STEER_RANGE[1]
    return np.clip(a, -1.0, 1.0)[:, None].astype(np.float32)


def teacher_action(obs: np.ndarray, action_mode: str, max_delta: float) -> np.ndarray:
    """Normalised teacher action ``[B, 1]`` read from basic observations ``[B, OBS_DIM]``."""
    obs = _host(obs)
    return normalised_teacher(obs[:, TEACHER_INDEX].astype(np.float64), obs[:, LAST_ACTION_INDEX].astype(np.float64),
                              action_mode, max_delta)


def env_teacher_action(env, obs, action_mode: str, max_delta: float) -> np.ndarray:
    """The teacher's normalised action for the env's current step (from its feature state)."""
    core = getattr(env, "core", None)
    if core is None or getattr(core, "features", None) is None:
        if obs.shape[-1] != OBS_DIM:
            raise ValueError("behaviour cloning with a 'rich' observation needs env.kind 'vector'")
        return teacher_action(obs, action_mode, max_delta)
    f = core.features
    return normalised_teacher(_host(f.teacher).astype(np.float64), _host(f.last_action).astype(np.float64),
                              action_mode, max_delta)


def collect_teacher(env, episodes: int, obs: np.ndarray, action_mode: str, max_delta: float,
                    noise: float = 0.0, rng: np.random.Generator | None = None):
    """Run the (noisy) teacher for ``episodes`` whole episodes per env.

    Returns (obs, clean teacher actions, rewards, dones) arrays ``[T, N, ...]``.
    """
    o, a, r, d = [], [], [], []
    rounds = 0
    rng = rng or np.random.default_rng(0)
    while rounds < episodes:
        act = env_teacher_action(env, obs, action_mode, max_delta)
        executed = np.clip(act + noise * rng.standard_normal(act.shape), -1, 1).astype(np.float32) if noise else act
        nxt, reward, term, trunc, _info = env.step(executed)
        done = np.logical_or(term, trunc)
        o.append(_host(obs)), a.append(act), r.append(_host(reward)), d.append(done)
        obs = nxt
        rounds += int(done.all())
    return np.stack(o), np.stack(a), np.stack(r), np.stack(d)


def discounted_returns(rewards: np.ndarray, dones: np.ndarray, gamma: float) -> np.ndarray:
    """``[T, N]`` returns that restart after each episode end (no bootstrap at the tail)."""
    out = np.zeros_like(rewards, dtype=np.float64)
    running = np.zeros(rewards.shape[1])
    for t in reversed(range(len(rewards))):
        running = rewards[t] + gamma * running * (1.0 - dones[t])
        out[t] = running
    return out


def behavior_clone(policy: ActorCritic, env, cfg: dict, device: torch.device, obs: np.ndarray) -> dict[str, float]:
    """Collect teacher data from ``env`` (starting at observation ``obs``) and fit ``policy``."""
    bc, ppo = cfg["bc"], cfg["ppo"]
    mode, max_delta = cfg["env"]["action_mode"], float(cfg["env"]["max_delta"])
    o, a, r, d = collect_teacher(env, int(bc["episodes"]), obs, mode, max_delta, float(bc.get("noise", 0.0)),
                                 np.random.default_rng(int(cfg["seed"]) + 3))
    raw_ret = discounted_returns(r.astype(np.float64), d.astype(np.float64), float(ppo["gamma"]))
    # The critic learns returns on the scale PPO will use: a fixed reward scale, or (reward_norm)
    # rewards divided by the std of the discounted return, estimated here from the teacher's.
    return_var = float(raw_ret.var())
    scale = 1.0 / np.sqrt(return_var + 1e-8) if ppo.get("reward_norm") else float(ppo["reward_scale"])
    ret = raw_ret * scale
    obs_t = torch.as_tensor(o.reshape(-1, o.shape[-1]), device=device)
    act_t = torch.as_tensor(a.reshape(-1, 1), device=device)
    ret_t = torch.as_tensor(ret.reshape(-1), device=device, dtype=torch.float32)
    if policy.normalize_obs:
        policy.obs_norm.update(obs_t)
    raw_t = policy.from_action(act_t)
    # The spread is not a gradient parameter here: Adam would move it by about the learning rate
    # per step, far too slowly; with learn_std it is set in closed form after the mean is fitted.
    learn_std = bool(bc.get("learn_std", False)) and policy.distribution == "squashed_gaussian"
    min_log_std = float(bc.get("min_log_std", -5.0))
    params = [p for name, p in policy.named_parameters() if name != "log_std"]
    opt = torch.optim.Adam(params, lr=float(bc["learning_rate"]))
    gen = torch.Generator().manual_seed(int(cfg["seed"]) + 2)
    n, bs = obs_t.shape[0], int(bc["batch_size"])
    loss_pi = loss_v = torch.tensor(float("nan"))
    for _epoch in range(int(bc["epochs"])):
        order = minibatch_order(n, gen, device)
        for start in range(0, n, bs):
            idx = order[start : start + bs]
            logp, _ent, value = policy.evaluate(obs_t[idx], raw_t[idx])
            loss_pi = -logp.mean()
            loss_v = 0.5 * ((value - ret_t[idx]) ** 2).mean()
            opt.zero_grad()
            (loss_pi + loss_v).backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
    nll, v_loss = float(loss_pi.detach()), float(loss_v.detach())  # the last minibatch's, read once
    with torch.no_grad():
        det = policy.deterministic(obs_t)
        mae = float((det - act_t).abs().mean())
        if learn_std:
            # Likelihood optimum of a Gaussian's spread around the fitted mean: the RMS error.
            rms = torch.sqrt(((policy.dist(obs_t).loc - raw_t) ** 2).mean())
            policy.log_std.fill_(max(float(torch.log(rms + 1e-12)), min_log_std))
    # cost of the executed (noisy) teacher episodes
    teacher_cost = float(-r.sum(0).mean() * 1.0 / max(1, int(bc["episodes"])))
    out = {"nll": nll, "value_loss": v_loss, "action_mae": mae, "teacher_episode_cost": teacher_cost,
           "samples": float(n), "return_var": return_var}
    if hasattr(policy, "log_std"):
        out["log_std"] = float(policy.log_std.detach().mean())
    return out
