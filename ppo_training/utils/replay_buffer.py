"""On-policy rollout storage with generalised advantage estimation."""
from __future__ import annotations

import torch


class RolloutBuffer:
    """``[T, N]`` tensors of one PPO rollout, kept on the training device.

    Args:
        num_steps: T, steps per env per rollout.
        num_envs: N.
        obs_dim: observation size.
        device: where the tensors live.

    Fields (``obs`` ``[T, N, obs_dim]``, ``raw`` ``[T, N, 1]``, the rest ``[T, N]``):
    ``obs``, ``raw`` (raw action samples), ``logprobs``, ``rewards``, ``dones`` (1 where the
    episode ended *after* this step), ``values``; :meth:`compute_returns` fills ``advantages``
    and ``returns``.
    """

    def __init__(self, num_steps: int, num_envs: int, obs_dim: int, device: torch.device | str = "cpu") -> None:
        self.num_steps, self.num_envs = num_steps, num_envs
        z = lambda *s: torch.zeros((num_steps, num_envs, *s), device=device)  # noqa: E731
        self.obs, self.raw = z(obs_dim), z(1)
        self.logprobs, self.rewards, self.dones, self.values = z(), z(), z(), z()
        self.advantages, self.returns = z(), z()
        self.pos = 0

    def add(self, obs, raw, logprob, reward, done, value) -> None:
        """Store step ``pos`` for all envs."""
        t = self.pos
        self.obs[t], self.raw[t], self.logprobs[t] = obs, raw, logprob
        self.rewards[t], self.dones[t], self.values[t] = reward, done, value
        self.pos += 1

    @property
    def full(self) -> bool:
        return self.pos >= self.num_steps

    @torch.no_grad()
    def compute_returns(self, last_value: torch.Tensor, gamma: float, gae_lambda: float) -> None:
        """GAE(lambda) advantages and value targets; ``last_value`` ``[N]`` bootstraps the tail."""
        last_gae = torch.zeros_like(last_value)
        for t in reversed(range(self.num_steps)):
            next_value = last_value if t == self.num_steps - 1 else self.values[t + 1]
            nonterminal = 1.0 - self.dones[t]
            delta = self.rewards[t] + gamma * next_value * nonterminal - self.values[t]
            last_gae = delta + gamma * gae_lambda * nonterminal * last_gae
            self.advantages[t] = last_gae
        self.returns = self.advantages + self.values

    @torch.no_grad()
    def compute_paired_advantages(self, gamma: float) -> None:
        """Advantages from pairs of rows that drive the same segment (rows 2k and 2k+1).

        Both rows of a pair share the segment and therefore the simulator's random stream, so the
        difference of their discounted rewards-to-go cancels most of the simulator's sampling
        noise and the segment's difficulty, leaving the effect of the policy's own action noise
        (common random numbers).  ``advantages[:, 2k] = G[:, 2k] - G[:, 2k+1]`` and the negative
        for its partner; ``returns`` are the rewards-to-go (the critic keeps learning them).
        """
        if self.num_envs % 2:
            raise ValueError("paired advantages need an even number of envs")
        running = torch.zeros_like(self.rewards[0])
        for t in reversed(range(self.num_steps)):
            running = self.rewards[t] + gamma * running * (1.0 - self.dones[t])
            self.returns[t] = running
        diff = self.returns[:, 0::2] - self.returns[:, 1::2]
        self.advantages[:, 0::2] = diff
        self.advantages[:, 1::2] = -diff

    @torch.no_grad()
    def scale_advantages_per_env(self) -> None:
        """Divide each env's advantages by their spread over the rollout.

        Segments differ a lot in how much a small steer change costs (speed, curvature, how
        noisy the simulator is there), so a few costly segments would otherwise set the direction
        of every update; scaled per env, each segment gets an equal say.
        """
        self.advantages = self.advantages / (self.advantages.std(dim=0, keepdim=True) + 1e-8)

    def flat(self) -> dict[str, torch.Tensor]:
        """All fields flattened to ``[T*N, ...]`` for minibatching."""
        n = self.num_steps * self.num_envs
        return {
            "obs": self.obs.reshape(n, -1), "raw": self.raw.reshape(n, 1),
            "logprobs": self.logprobs.reshape(n), "advantages": self.advantages.reshape(n),
            "returns": self.returns.reshape(n), "values": self.values.reshape(n),
        }

    def reset(self) -> None:
        self.pos = 0
