"""Construct the actor-critic a config describes (training, checkpoints and evaluation share it)."""
from __future__ import annotations

from ..environment.lateral_env import EnvConfig
from .actor_critic import ActorCritic


def build_policy(cfg: dict, obs_dim: int | None = None) -> ActorCritic:
    """A fresh :class:`ActorCritic` from the ``policy`` section of a config.

    Args:
        cfg: a full config dict (see ``config.yaml``); ``cfg["policy"]`` and, for the
            observation size, ``cfg["env"]`` are read.
        obs_dim: observation size (a checkpoint stores the one it was trained with; default: the
            size of the configured observation).
    """
    p = cfg["policy"]
    return ActorCritic(obs_dim or EnvConfig.from_config(cfg).obs_dim, hidden=tuple(p["hidden"]),
                       distribution=p["distribution"], activation=p["activation"],
                       init_log_std=float(p.get("init_log_std", -1.0)), normalize_obs=bool(p.get("normalize_obs", True)),
                       zero_init_actor=bool(p.get("zero_init_actor", False)),
                       linear_skip=bool(p.get("linear_skip", False)))
