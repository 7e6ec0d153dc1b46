"""Running statistics for reward scaling."""
from __future__ import annotations

import torch


class ReturnNormalizer:
    """Divides rewards by the running standard deviation of the discounted return.

    The return of each env is accumulated with ``gamma`` and reset where an episode ends; its
    variance (Welford over all envs and steps so far) gives the scale.  Rewards keep their sign
    and their mean (no centring), so the optimum is unchanged.

    Args:
        num_envs: N.
        gamma: discount of the accumulated return.
        device: where the running tensors live.
    """

    def __init__(self, num_envs: int, gamma: float, device: torch.device | str = "cpu", eps: float = 1e-8) -> None:
        self.gamma, self.eps = gamma, eps
        self.returns = torch.zeros(num_envs, dtype=torch.float64, device=device)
        self.mean = torch.zeros((), dtype=torch.float64, device=device)
        self.var = torch.ones((), dtype=torch.float64, device=device)
        self.count = torch.tensor(1e-4, dtype=torch.float64, device=device)

    @torch.no_grad()
    def __call__(self, reward: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
        """Scaled rewards ``[N]`` (float32) of raw rewards ``[N]``; ``done`` ``[N]`` ends returns."""
        r = reward.to(torch.float64)
        self.returns = self.returns * self.gamma + r
        x, n = self.returns, self.returns.numel()
        b_mean, b_var = x.mean(), x.var(unbiased=False)
        delta, total = b_mean - self.mean, self.count + n
        self.mean = self.mean + delta * n / total
        self.var = (self.var * self.count + b_var * n + delta**2 * self.count * n / total) / total
        self.count = total
        self.returns = self.returns * (1.0 - done.to(torch.float64))
        return (r / torch.sqrt(self.var + self.eps)).to(torch.float32)

    def seed(self, var: float, count: float) -> None:
        """Start from a known return variance (e.g. the teacher's, measured before training)."""
        self.var = torch.full_like(self.var, var)
        self.count = torch.full_like(self.count, count)

    @property
    def std(self) -> float:
        return float(torch.sqrt(self.var + self.eps))

    def state_dict(self) -> dict:
        return {"returns": self.returns.cpu(), "mean": self.mean.cpu(), "var": self.var.cpu(), "count": self.count.cpu()}

    def load_state_dict(self, state: dict) -> None:
        device = self.returns.device
        for k in ("returns", "mean", "var", "count"):
            setattr(self, k, state[k].to(device=device, dtype=torch.float64))
