"""Construct the actor-critic a config describes (training, checkpoints and evaluation share it)."""
from __future__ import annotations

from ..environment.features import OBS_DIM
from .actor_critic import ActorCritic


def build_policy(cfg: dict, obs_dim: int = OBS_DIM) -> ActorCritic:
    """A fresh :class:`ActorCritic` from the ``policy`` section of a config.

    Args:
        cfg: a full config dict (see ``config.yaml``); only ``cfg["policy"]`` is read.
        obs_dim: observation size (a checkpoint stores the one it was trained with).
    """
    p = cfg["policy"]
    return ActorCritic(obs_dim, hidden=tuple(p["hidden"]), distribution=p["distribution"],
                       activation=p["activation"], init_log_std=float(p.get("init_log_std", -1.0)),
                       normalize_obs=bool(p.get("normalize_obs", True)))
