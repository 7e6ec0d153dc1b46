"""Exploration noise for the squashed-Gaussian policy: independent or temporally correlated.

Steer noise is paid in jerk cost, and white noise is the most expensive kind: every step's
change is fresh.  AR(1) noise ``z_t = rho * z_{t-1} + sqrt(1 - rho^2) * xi_t`` keeps the same
per-step spread (``z_t`` is standard normal at every step) but changes smoothly for ``rho``
near 1.  With ``antithetic`` the rows of a pair (2k, 2k+1, which drive the same segment with the
same simulator noise) get opposite draws, so their returns differ only through the sign of the
exploration.  For gSDE the draws are the exploration matrix (``dim`` = the actor's latent size),
held for ``hold`` steps (-1: a whole rollout).
"""
from __future__ import annotations

import math

import torch

NOISE_KINDS = ("iid", "ar1")


class ExplorationNoise:
    """Standard-normal draws ``[N, dim]`` per step for N envs.

    Args:
        kind: ``"iid"`` or ``"ar1"``.
        rho: AR(1) coefficient in [0, 1).
        num_envs: N.
        antithetic: rows 2k+1 get minus the draws of rows 2k (N must be even).
        device: where the draws are made.
        seed: seed of the private generator (saved and restored with :meth:`state`).
        dim: draws per env and step.
        hold: keep a draw for this many steps (1: fresh every step; -1: until :meth:`reset`).
    """

    def __init__(self, kind: str, rho: float, num_envs: int, antithetic: bool = False,
                 device: torch.device | str = "cpu", seed: int = 0, dim: int = 1, hold: int = 1) -> None:
        if kind not in NOISE_KINDS:
            raise ValueError(f"exploration noise must be one of {NOISE_KINDS}, got {kind!r}")
        if not 0.0 <= rho < 1.0:
            raise ValueError(f"noise_rho must be in [0, 1), got {rho}")
        if antithetic and num_envs % 2:
            raise ValueError(f"antithetic noise needs an even number of envs, got {num_envs}")
        if hold == 0 or hold < -1:
            raise ValueError(f"hold must be a positive number of steps or -1, got {hold}")
        self.kind, self.rho, self.num_envs, self.antithetic = kind, rho, num_envs, antithetic
        self.dim, self.hold, self.age = dim, hold, 0
        self.device = torch.device(device)
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self.z: torch.Tensor | None = None

    def _fresh(self) -> torch.Tensor:
        n = self.num_envs // 2 if self.antithetic else self.num_envs
        xi = torch.randn((n, self.dim), generator=self.generator, device=self.device)
        if self.antithetic:
            xi = torch.stack([xi, -xi], dim=1).reshape(self.num_envs, self.dim)
        return xi

    def reset(self) -> None:
        """New episodes: the next draw starts from the stationary distribution."""
        self.z = None

    def sample(self) -> torch.Tensor:
        if self.z is not None and (self.hold == -1 or self.age < self.hold - 1) and self.hold != 1:
            self.age += 1
            return self.z
        self.age = 0
        xi = self._fresh()
        if self.kind == "iid" or self.z is None:
            self.z = xi
        else:
            self.z = self.rho * self.z + math.sqrt(1.0 - self.rho**2) * xi
        return self.z

    def state(self) -> dict:
        return {"generator": self.generator.get_state(), "z": None if self.z is None else self.z.cpu(), "age": self.age}

    def load_state(self, state: dict) -> None:
        self.generator.set_state(state["generator"])
        self.z = None if state["z"] is None else state["z"].to(self.device)
        self.age = int(state.get("age", 0))
