"""Actor and critic MLPs with a bounded action distribution on [-1, 1].

Two parameterisations of the action distribution:

* ``beta``: ``x ~ Beta(alpha, beta)`` on (0, 1), action ``a = 2x - 1``; the deterministic action is
  the distribution's mean.  The raw sample stored for PPO is ``x``.
* ``squashed_gaussian``: ``u ~ Normal(mu, sigma)``, action ``a = tanh(u)``; deterministic action
  ``tanh(mu)``.  The raw sample stored is ``u`` (log-probabilities are taken on ``u``; the tanh
  Jacobian cancels in PPO's probability ratio).
* ``gsde``: the squashed Gaussian with generalised state-dependent exploration (Raffin et al.,
  2022, as in Stable-Baselines3's ``use_sde``): the noise is ``eps = phi(s) . theta`` where
  ``phi(s)`` are the actor's last hidden features and ``theta ~ Normal(0, sigma_j^2)`` is drawn per
  env and held for a while, so the exploration changes with the state rather than every step.
  Its density is ``Normal(mu, sqrt(sum_j phi_j^2 sigma_j^2))``.

Shapes: observations ``[..., obs_dim]`` float32, raw samples and actions ``[..., 1]``.
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.distributions import Beta, Normal

DISTRIBUTIONS = ("beta", "squashed_gaussian", "gsde")


def mlp(sizes: list[int], activation: type[nn.Module], out_gain: float) -> nn.Sequential:
    """A tanh/relu MLP with orthogonal initialisation; ``out_gain`` scales the last layer."""
    layers: list[nn.Module] = []
    for k in range(len(sizes) - 1):
        lin = nn.Linear(sizes[k], sizes[k + 1])
        last = k == len(sizes) - 2
        if last and out_gain == 0.0:
            nn.init.zeros_(lin.weight)
        else:
            nn.init.orthogonal_(lin.weight, out_gain if last else math.sqrt(2))
        nn.init.zeros_(lin.bias)
        layers.append(lin)
        if not last:
            layers.append(activation())
    return nn.Sequential(*layers)


class ActorCritic(nn.Module):
    """Separate actor and critic MLPs.

    Args:
        obs_dim: observation size.
        hidden: hidden layer widths (both networks).
        distribution: ``"beta"`` or ``"squashed_gaussian"``.
        activation: ``"tanh"`` or ``"relu"``.
        init_log_std: initial log sigma of the squashed Gaussian (``gsde``: of the effective
            spread for hidden features of unit size, spread over the features).
        normalize_obs: standardise observations with running statistics (:attr:`obs_norm`,
            updated by the trainer, saved with the weights).
        zero_init_actor: start the actor's last layer at zero, so the deterministic action is
            exactly 0 (in residual mode: exactly the teacher) until training moves it.
        linear_skip: add a linear map of the (normalised) observation to the actor's output,
            starting at zero: a linear controller is a strong prior for steering, and its few
            weights learn faster than the MLP finds the same function.
    """

    def __init__(self, obs_dim: int, hidden: tuple[int, ...] = (128, 128), distribution: str = "beta",
                 activation: str = "tanh", init_log_std: float = -1.0, normalize_obs: bool = True,
                 zero_init_actor: bool = False, linear_skip: bool = False) -> None:
        super().__init__()
        self.normalize_obs = normalize_obs
        self.obs_norm = RunningNorm(obs_dim)
        if distribution not in DISTRIBUTIONS:
            raise ValueError(f"distribution must be one of {DISTRIBUTIONS}, got {distribution!r}")
        act = {"tanh": nn.Tanh, "relu": nn.ReLU}[activation]
        self.distribution = distribution
        self.obs_dim = obs_dim
        n_out = 2 if distribution == "beta" else 1
        self.actor = mlp([obs_dim, *hidden, n_out], act, 0.0 if zero_init_actor else 0.01)
        self.skip = None
        if linear_skip:
            self.skip = nn.Linear(obs_dim, n_out, bias=False)
            nn.init.zeros_(self.skip.weight)
        self.critic = mlp([obs_dim, *hidden, 1], act, 1.0)
        if distribution == "squashed_gaussian":
            self.log_std = nn.Parameter(torch.full((1,), float(init_log_std)))
        elif distribution == "gsde":
            self.latent_dim = hidden[-1]
            per_feature = float(init_log_std) - 0.5 * math.log(self.latent_dim)
            self.log_std = nn.Parameter(torch.full((self.latent_dim,), per_feature))

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """State value ``[...]``."""
        return self.critic(self._norm(obs)).squeeze(-1)

    def _norm(self, obs: torch.Tensor) -> torch.Tensor:
        return self.obs_norm(obs) if self.normalize_obs else obs

    def _latent_and_dist(self, obs: torch.Tensor):
        if self.distribution != "gsde":
            return None, self.dist(obs)
        x = self._norm(obs)
        latent = self.actor[:-1](x)
        mean = self.actor[-1](latent)
        if self.skip is not None:
            mean = mean + self.skip(x)
        # The features enter the spread without gradient (as in gSDE): the spread is learned
        # through log_std, the features through the mean.
        var = (latent.detach() ** 2) @ (2.0 * self.log_std).exp()
        return latent.detach(), Normal(mean, torch.sqrt(var + 1e-12).unsqueeze(-1), validate_args=False)

    def dist(self, obs: torch.Tensor):
        """The action distribution over raw samples (``[..., 1]``)."""
        if self.distribution == "gsde":
            return self._latent_and_dist(obs)[1]
        x = self._norm(obs)
        out = self.actor(x)
        if self.skip is not None:
            out = out + self.skip(x)
        if self.distribution == "beta":
            # softplus + 1 keeps alpha, beta > 1: unimodal, no mass piling at the bounds.
            ab = nn.functional.softplus(out) + 1.0
            return Beta(ab[..., :1], ab[..., 1:], validate_args=False)
        # validate_args=False: argument checks read values back to the host, a device
        # synchronisation per call (every env step and minibatch on a GPU)
        return Normal(out, self.log_std.exp().expand_as(out), validate_args=False)

    def to_action(self, raw: torch.Tensor) -> torch.Tensor:
        """Action in [-1, 1] of a raw sample."""
        return raw * 2.0 - 1.0 if self.distribution == "beta" else torch.tanh(raw)

    def from_action(self, action: torch.Tensor, eps: float = 1e-4) -> torch.Tensor:
        """Raw sample of an action in [-1, 1] (clipped away from the bounds), for cloning."""
        a = action.clamp(-1 + eps, 1 - eps)
        return (a + 1.0) * 0.5 if self.distribution == "beta" else torch.atanh(a)

    def deterministic(self, obs: torch.Tensor) -> torch.Tensor:
        """The deterministic action ``[..., 1]`` in [-1, 1] (mean of Beta, tanh of the mean)."""
        d = self.dist(obs)
        return self.to_action(d.mean)

    def act(self, obs: torch.Tensor, noise: torch.Tensor | None = None):
        """Sample: (raw ``[..., 1]``, action ``[..., 1]``, log-prob ``[...]``, value ``[...]``).

        ``noise``: standard-normal draws to use instead of fresh ones: ``[..., 1]`` for the squashed
        Gaussian (e.g. temporally correlated exploration noise), ``[..., latent]`` for ``gsde``
        (the held exploration matrix, scaled here by the current per-feature sigmas; required).
        The log-probability is the policy's own (marginal) density of the sample.
        """
        latent, d = self._latent_and_dist(obs)
        if self.distribution == "gsde":
            if noise is None:
                raise ValueError("gsde sampling needs the held exploration noise (see ExplorationNoise)")
            raw = d.loc + (latent * self.log_std.exp() * noise).sum(-1, keepdim=True)
        elif noise is not None and self.distribution == "squashed_gaussian":
            raw = d.loc + d.scale * noise
        else:
            raw = d.sample()
        if self.distribution == "beta":
            raw = raw.clamp(1e-6, 1 - 1e-6)
        return raw, self.to_action(raw), d.log_prob(raw).sum(-1), self.value(obs)

    def evaluate(self, obs: torch.Tensor, raw: torch.Tensor):
        """(log-prob ``[...]``, entropy ``[...]``, value ``[...]``) of stored raw samples."""
        d = self.dist(obs)
        return d.log_prob(raw).sum(-1), d.entropy().sum(-1), self.value(obs)


class RunningNorm(nn.Module):
    """Running mean / variance of observations (Welford over batches); frozen when not training."""

    def __init__(self, dim: int, clip: float = 10.0) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(dim, dtype=torch.float64))
        self.register_buffer("var", torch.ones(dim, dtype=torch.float64))
        self.register_buffer("count", torch.tensor(1e-4, dtype=torch.float64))
        self.clip = clip

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        x = x.reshape(-1, x.shape[-1]).double()
        b_mean, b_var, n = x.mean(0), x.var(0, unbiased=False), x.shape[0]
        delta, total = b_mean - self.mean, self.count + n
        self.mean += delta * n / total
        self.var = (self.var * self.count + b_var * n + delta**2 * self.count * n / total) / total
        self.count = total

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = (x - self.mean.to(x.dtype)) / torch.sqrt(self.var.to(x.dtype) + 1e-8)
        return y.clamp(-self.clip, self.clip)
