"""Controllers built on the observation features: the feedforward-PID teacher and a trained policy."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..environment.features import FeatureState, action_to_steer, model_correction
from ..environment.lateral_env import EnvConfig, observe
from ..policy.numpy_policy import NumpyPolicy
from ..sim.control import BatchedController, ControlInputs


class _FeatureController(BatchedController):
    """Keeps a :class:`FeatureState` in the array namespace of the engine it is driven by."""

    #: Observation settings of the feature state (a policy's come from its :class:`EnvConfig`).
    cfg = EnvConfig()

    def reset(self, batch_size: int) -> None:
        self.batch_size = batch_size
        self.features: FeatureState | None = None

    def reset_rows(self, rows) -> None:
        if self.features is not None:
            self.features.reset_rows(rows)

    def _features(self, inputs: ControlInputs) -> FeatureState:
        if self.features is None:
            self.features = self.cfg.new_features(self.batch_size, xp=inputs.xp)
        return self.features


class TeacherController(_FeatureController):
    """PID plus feedforward from the plan and the road roll (see ``features.TEACHER``).

    Args:
        correction: gain of the model correction added to the teacher's steer (0: the plain
            teacher, which is what training clones; see ``features.model_correction``).
    """

    name = "teacher"

    def __init__(self, correction: float = 0.0) -> None:
        if correction:
            self.cfg = EnvConfig(action_mode="residual", observation="rich", prediction=True, correction=correction)
            self.name = f"teacher+model{correction:g}"
        self.correction = correction

    def __call__(self, inputs: ControlInputs) -> np.ndarray:
        features = self._features(inputs)
        observe(features, inputs)
        out = features.teacher
        if self.correction and not inputs.warmup:
            out = action_to_steer(features.xp.zeros(len(out)), features.last_action, "residual", 0.0, out,
                                  xp=features.xp, offset=model_correction(features, self.correction))
        features.record(out)
        return out


def numpy_policy_from_torch(policy) -> NumpyPolicy:
    """The deterministic actor of an :class:`~ppo_training.policy.actor_critic.ActorCritic` in numpy."""
    import torch

    linears = [m for m in policy.actor if isinstance(m, torch.nn.Linear)]
    layers = [(m.weight.detach().double().cpu().numpy(), m.bias.detach().double().cpu().numpy()) for m in linears]
    mean = std = None
    if policy.normalize_obs:
        mean = policy.obs_norm.mean.detach().cpu().numpy().astype(np.float64)
        std = np.sqrt(policy.obs_norm.var.detach().cpu().numpy().astype(np.float64) + 1e-8)
    activation = "tanh" if isinstance(policy.actor[1], torch.nn.Tanh) else "relu"
    skip = None if getattr(policy, "skip", None) is None else policy.skip.weight.detach().double().cpu().numpy()
    return NumpyPolicy(layers, activation, policy.distribution, mean, std, float(policy.obs_norm.clip), skip)


class PolicyController(_FeatureController):
    """A trained policy driving the car deterministically, exactly like the training env.

    The actor runs in numpy (:class:`NumpyPolicy`), the same code as the exported
    official-format controller, so both give identical costs.  During warm-up (steps 20-99,
    output discarded by the simulator) it returns the teacher's action, as the environment's
    fast-forward does, so the feature state matches training.

    Args:
        policy: a :class:`NumpyPolicy`, or an ``ActorCritic`` (converted).
        env_config: the :class:`EnvConfig` it was trained with (action mapping).
    """

    name = "ppo"

    def __init__(self, policy, env_config: EnvConfig) -> None:
        self.policy = policy if isinstance(policy, NumpyPolicy) else numpy_policy_from_torch(policy)
        self.cfg = env_config

    @classmethod
    def from_checkpoint(cls, path: str | Path) -> "PolicyController":
        """Load a trainer checkpoint (clear :class:`CheckpointError` for anything else)."""
        from ..policy.factory import build_policy
        from ..utils.checkpoint import CheckpointError, evaluation_weights, load_checkpoint

        ckpt = load_checkpoint(path)
        try:
            policy = build_policy(ckpt["config"], ckpt["obs_dim"])
            policy.load_state_dict(evaluation_weights(ckpt))
            env_cfg = EnvConfig(**ckpt["env_config"])
        except (KeyError, RuntimeError, TypeError, ValueError) as exc:
            raise CheckpointError(f"{path}: checkpoint does not match this version's policy ({exc})") from None
        ctrl = cls(policy, env_cfg)
        ctrl.checkpoint = ckpt
        ctrl.name = Path(path).stem
        return ctrl

    def __call__(self, inputs: ControlInputs) -> np.ndarray:
        features = self._features(inputs)
        obs = observe(features, inputs)
        if inputs.warmup:
            out = features.teacher
        else:
            # The numpy actor runs on the host (one copy per step with a device backend).
            a = self.policy.action(inputs._sim.backend.to_numpy(obs))
            out = action_to_steer(features.xp.asarray(a), features.last_action, self.cfg.action_mode,
                                  self.cfg.max_delta, features.teacher, xp=features.xp,
                                  offset=model_correction(features, self.cfg.correction))
        features.record(out)
        return out
