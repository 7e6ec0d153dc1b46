"""Gymnasium environments and the observation features."""
from .features import OBS_DIM, FeatureState
from .lateral_env import (
    EnvConfig,
    LateralControlEnv,
    VectorizedLateralControlEnv,
    action_to_steer,
    make_async_env,
)

__all__ = [
    "OBS_DIM",
    "EnvConfig",
    "FeatureState",
    "LateralControlEnv",
    "VectorizedLateralControlEnv",
    "action_to_steer",
    "make_async_env",
]
