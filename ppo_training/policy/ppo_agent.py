"""PPO with a clipped surrogate, read top to bottom.

One call of :meth:`PPOAgent.update` consumes a filled :class:`RolloutBuffer` (advantages already
computed) and runs ``update_epochs`` passes of ``num_minibatches`` minibatches.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn

from ..utils.replay_buffer import RolloutBuffer
from .actor_critic import ActorCritic


@dataclass
class PPOConfig:
    """Every PPO hyper-parameter, named once."""

    learning_rate: float = 3e-4
    anneal_lr: bool = True          # linear decay to 0 over the run
    gamma: float = 0.99
    gae_lambda: float = 0.95
    advantage: str = "gae"          # gae | paired (rows 2k, 2k+1 share a segment: common random numbers)
    update_epochs: int = 4
    num_minibatches: int = 8
    clip_coef: float = 0.2
    clip_vloss: bool = True
    vf_coef: float = 0.5
    ent_coef: float = 0.0
    max_grad_norm: float = 0.5
    norm_adv: bool = True
    adv_scale_per_env: bool = False  # divide each env's advantages by their spread before the update
    target_kl: float | None = 0.02  # stop the epochs of an update early past this KL
    reward_scale: float = 0.02      # rewards are -cost contributions; scaled for the critic
    reward_norm: bool = False       # divide rewards by the running std of the discounted return instead
    value_loss: str = "mse"         # mse | huber (less pulled by the rare very costly steps)
    exploration: str = "iid"        # iid | ar1 (temporally correlated; squashed Gaussian only)
    noise_rho: float = 0.5          # AR(1) coefficient of the exploration noise
    antithetic: bool = False        # paired rows explore with opposite noise
    sde_sample_freq: int = -1       # gsde policy: steps between new exploration matrices (-1: per rollout)

    def __post_init__(self) -> None:
        if self.advantage not in ("gae", "paired"):
            raise ValueError(f"ppo.advantage must be 'gae' or 'paired', got {self.advantage!r}")
        if self.value_loss not in ("mse", "huber"):
            raise ValueError(f"ppo.value_loss must be 'mse' or 'huber', got {self.value_loss!r}")

    def to_dict(self) -> dict:
        return asdict(self)


def minibatch_order(n: int, generator: torch.Generator | None, device: torch.device | str) -> torch.Tensor:
    """A random permutation of ``range(n)`` on ``device``, reproducible from ``generator`` (a CPU one).

    On the CPU it is ``torch.randperm(n, generator=generator)``.  Elsewhere the CPU generator only
    draws a seed and the permutation is made on the device itself: a CPU permutation of millions
    of indices and its copy to the device would cost more than the update's arithmetic.
    """
    device = torch.device(device)
    if device.type == "cpu":
        return torch.randperm(n, generator=generator)
    seed = int(torch.randint(0, 2**62, (1,), generator=generator))
    return torch.randperm(n, generator=torch.Generator(device=device).manual_seed(seed), device=device)


class PPOAgent:
    """Owns the policy's optimiser and performs PPO updates.

    Args:
        policy: the actor-critic.
        cfg: :class:`PPOConfig`.
    """

    def __init__(self, policy: ActorCritic, cfg: PPOConfig) -> None:
        self.policy = policy
        self.cfg = cfg
        self.optimizer = torch.optim.Adam(policy.parameters(), lr=cfg.learning_rate, eps=1e-5)

    def set_progress(self, fraction_done: float) -> float:
        """Apply the learning-rate schedule; returns the learning rate in use."""
        lr = self.cfg.learning_rate * (1.0 - fraction_done) if self.cfg.anneal_lr else self.cfg.learning_rate
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr

    def _value_error(self, err: torch.Tensor) -> torch.Tensor:
        """Per-sample value loss: ``0.5 err^2``, or the Huber loss (quadratic within 1, then linear)."""
        if self.cfg.value_loss == "huber":
            return nn.functional.huber_loss(err, torch.zeros_like(err), reduction="none", delta=1.0)
        return 0.5 * err**2

    def update(self, buffer: RolloutBuffer, generator: torch.Generator | None = None) -> dict[str, float]:
        """Run the PPO epochs on ``buffer``; returns mean losses and diagnostics."""
        cfg, policy = self.cfg, self.policy
        data = buffer.flat()
        n = data["obs"].shape[0]
        mb_size = max(1, n // cfg.num_minibatches)
        # Per-minibatch statistics stay on the device until the end (one host read per update,
        # plus one per minibatch for the KL early stop).
        stats: dict[str, list[torch.Tensor]] = {k: [] for k in ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_frac")}
        stop = False
        for _epoch in range(cfg.update_epochs):
            order = minibatch_order(n, generator, data["obs"].device)
            for start in range(0, n, mb_size):
                idx = order[start : start + mb_size]
                new_logp, entropy, new_value = policy.evaluate(data["obs"][idx], data["raw"][idx])
                log_ratio = new_logp - data["logprobs"][idx]
                ratio = log_ratio.exp()
                with torch.no_grad():
                    approx_kl = ((ratio - 1) - log_ratio).mean()
                    clip_frac = ((ratio - 1.0).abs() > cfg.clip_coef).float().mean()

                adv = data["advantages"][idx]
                if cfg.norm_adv and adv.numel() > 1:
                    adv = (adv - adv.mean()) / (adv.std() + 1e-8)

                # Clipped surrogate objective.
                pg_loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - cfg.clip_coef, 1 + cfg.clip_coef)).mean()

                # Value loss, optionally clipped around the old prediction.
                returns, old_v = data["returns"][idx], data["values"][idx]
                v_loss = self._value_error(new_value - returns)
                if cfg.clip_vloss:
                    v_clipped = old_v + (new_value - old_v).clamp(-cfg.clip_coef, cfg.clip_coef)
                    v_loss = torch.max(v_loss, self._value_error(v_clipped - returns))
                v_loss = v_loss.mean()

                ent = entropy.mean()
                loss = pg_loss - cfg.ent_coef * ent + cfg.vf_coef * v_loss
                self.optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(policy.parameters(), cfg.max_grad_norm)
                self.optimizer.step()

                for k, v in (("policy_loss", pg_loss), ("value_loss", v_loss), ("entropy", ent),
                             ("approx_kl", approx_kl), ("clip_frac", clip_frac)):
                    stats[k].append(v.detach())
                if cfg.target_kl is not None and approx_kl > cfg.target_kl:
                    stop = True
                    break
            if stop:
                break
        host = torch.stack([torch.stack(v) for v in stats.values()]).double().cpu().numpy()
        out = {k: float(np.mean(row)) for k, row in zip(stats, host)}
        values, returns = data["values"], data["returns"]
        var_y = returns.var()
        out["explained_variance"] = float(1 - (returns - values).var() / var_y) if var_y > 0 else float("nan")
        out["early_stop"] = float(stop)
        return out
