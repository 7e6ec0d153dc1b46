"""Behaviour-cloning warm start: fit the actor to the teacher's actions by likelihood.

The teacher (PID + feedforward) is part of the observation (its action, last feature) and so is
the previous steer output, so the teacher's normalised action can be read off each observation:
``a = (teacher - previous) / max_delta`` in delta mode, ``teacher / 2`` in absolute mode.  The
critic is fitted to the teacher's discounted (scaled) returns at the same time, so PPO starts
with a value function that matches the policy it starts from.

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

TEACHER_INDEX = OBS_DIM - 1
LAST_ACTION_INDEX = 7 + N_PREV_ACTIONS - 1


def _host(x) -> np.ndarray:
    """A numpy copy of a numpy array or a torch tensor (the warm start runs on the host)."""
    return x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)


def teacher_action(obs: np.ndarray, action_mode: str, max_delta: float) -> np.ndarray:
    """Normalised teacher action ``[B, 1]`` in [-1, 1] read from observations ``[B, OBS_DIM]``."""
    obs = _host(obs)
    teacher = obs[:, TEACHER_INDEX].astype(np.float64)
    if action_mode == "delta":
        a = (teacher - obs[:, LAST_ACTION_INDEX]) / max_delta
    elif action_mode == "residual":
        a = np.zeros_like(teacher)  # the teacher itself is the zero correction
    else:
        a = teacher / STEER_RANGE[1]
    return np.clip(a, -1.0, 1.0)[:, None].astype(np.float32)


def collect_teacher(env, episodes: int, obs: np.ndarray, action_mode: str, max_delta: float,
                    noise: float = 0.0, rng: np.random.Generator | None = None):
    """Run the (noisy) teacher for ``episodes`` whole episodes per env.

    Returns (obs, clean teacher actions, rewards, dones) arrays ``[T, N, ...]``.
    """
    o, a, r, d = [], [], [], []
    rounds = 0
    rng = rng or np.random.default_rng(0)
    while rounds < episodes:
        act = teacher_action(obs, action_mode, max_delta)
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
    ret = discounted_returns(r * float(ppo["reward_scale"]), d.astype(np.float64), float(ppo["gamma"]))
    obs_t = torch.as_tensor(o.reshape(-1, o.shape[-1]), device=device)
    act_t = torch.as_tensor(a.reshape(-1, 1), device=device)
    ret_t = torch.as_tensor(ret.reshape(-1), device=device, dtype=torch.float32)
    if policy.normalize_obs:
        policy.obs_norm.update(obs_t)
    raw_t = policy.from_action(act_t)
    # The squashed Gaussian's log-std is exploration noise for PPO, not something to clone: the
    # teacher's labels are noise-free and would shrink it to nothing.
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
    # cost of the executed (noisy) teacher episodes
    teacher_cost = float(-r.sum(0).mean() * 1.0 / max(1, int(bc["episodes"])))
    return {"nll": nll, "value_loss": v_loss, "action_mae": mae, "teacher_episode_cost": teacher_cost,
            "samples": float(n)}
