"""Generate synthetic driving segments calibrated on real TinyPhysics segments.

The files look like the real ones (``t,vEgo,aEgo,roll,targetLateralAcceleration,steerCommand``,
10 Hz, steer logged for the first 100 rows only) and load with
:func:`ppo_training.data.segments.load_segment`.  The folder receives a
``synthetic_manifest.json`` (:data:`~ppo_training.data.segments.SYNTHETIC_MANIFEST`), which is how
the rest of the project recognises generated data; it is written after the last CSV.

Usage::

    python -m ppo_training.data.synth --n 2000 --out data/synthetic --seed 0 [--rows 600]

File ``k`` depends only on ``(seed, k)`` (``np.random.default_rng([seed, k])``), so a data set can
be extended or regenerated partly and stays identical.

What is generated (per segment, all vectorised numpy):

* speed: a sequence of cruise levels (highway or city regime) joined by smooth cosine ramps with a
  random peak acceleration, occasional stops, plus a slow speed wander and a small sensor jitter.
  ``aEgo`` is the backward difference of ``vEgo`` plus sensor noise, which is how the real logs
  relate (``aEgo[k] ~ (vEgo[k] - vEgo[k-1]) / 0.1``, correlation 0.90-1.00, residual 0.04-0.09).
* road curvature ``kappa``: curves (ramp in, hold, ramp out), lane changes (one sine period),
  short sharp events and a narrow-band weaving component; the target is ``v**2 * kappa``
  (smoothly saturated at 4 m/s^2) plus a slowly mean-reverting and a white noise, scaled down at
  low speed, so the target vanishes at standstill as in the logs.
* roll: a per-segment crown bias, a slow drift, a bank term that follows the curve, a small noise;
  frozen while the car stands still (as in the logs).
* warm-up steer: ``steer_sim[k] = K * (target[k+3] - roll_lataccel[k+3]) + offset + noise``,
  logged as ``steerCommand = -steer_sim``.

This is a statistical imitation, not a vehicle model: the steer relation is a linear fit, and the
generated data carries the label "synthetic" everywhere it is used.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

import numpy as np

from ..constants import ACC_G, CONTROL_START_IDX, DEL_T, MIN_SEGMENT_ROWS
from .segments import SYNTHETIC_MANIFEST

GENERATOR_NAME = "ppo_training.data.synth"
GENERATOR_VERSION = "1.0"
HEADER = "t,vEgo,aEgo,roll,targetLateralAcceleration,steerCommand"
FILE_PATTERN = re.compile(r"^synth_(\d+)\.csv$")

# --------------------------------------------------------------------------------------------
# Calibration constants.  The numbers quoted in the comments were measured with numpy on the 8
# real segments of the challenge data (/work/shared/tinyphysics/data/0000[0-7].csv, 4,797 rows).
# The steer relation is a least-squares fit; the shape parameters of the speed, curvature and roll
# processes were set by hand and then tuned until bench/synth_calibration.py showed the pooled
# mean / p10 / p90 of speed, |target|, |target rate| and roll_lataccel, and PID's cost, close to
# the real ones.  8 segments are a small sample: per-segment quantities (levels, scales) were
# widened to plausible ranges around what the 8 show rather than fitted exactly.
# --------------------------------------------------------------------------------------------

# Speed.  Real per-segment mean speeds: 33.6, 31.2, 32.2 (highway, +-0.5-1 m/s of variation) and
# 20.9, 17.1, 11.4, 11.0, 10.4 (city/suburban: big accelerations, two stops).  Pooled over rows:
# mean 21.0, p10 6.4, p90 33.6 m/s.  Real |aEgo|: mean 0.30, p90 0.85 m/s^2; braking to a stop
# peaks at about -2.5 m/s^2, accelerating at about +1.8 m/s^2.
P_HIGHWAY = 0.4                     # share of highway segments (3 of 8 real)
HIGHWAY_LEVEL = (31.0, 3.0)         # normal(mean, sd) of the cruise level, m/s, clipped to HIGHWAY_RANGE
HIGHWAY_RANGE = (20.0, 35.0)        # m/s; the real maximum is 34: faster segments with curves drove
                                    # the simulator far outside its data (PID costs in the thousands)
HIGHWAY_STEP = 3.0                  # a highway level change is uniform in +-this, m/s
HIGHWAY_ACCEL = (0.15, 0.7)         # uniform range of the peak accel of a highway change, m/s^2
CITY_LEVEL = (5.0, 24.0)            # uniform range of city cruise levels, m/s
CITY_ACCEL = (0.5, 1.8)             # uniform range of the peak acceleration, m/s^2
CITY_DECEL = (0.6, 2.6)             # uniform range of the peak deceleration, m/s^2
MIN_RAMP_S = 2.0                    # shortest speed change (no one-step acceleration spikes), s
HOLD_MEAN_S = 14.0                  # mean (exponential) duration of a cruise phase, s
P_STOP = 0.15                       # probability that a city phase ends in a stop
STOP_HOLD_S = (2.0, 25.0)           # uniform range of the standstill duration, s
SPEED_WANDER = (0.3, 8.0)           # slow speed wander: sd m/s, time constant s (00000: +-0.5 m/s)
SPEED_JITTER = (0.012, 0.85)        # vEgo jitter: sd m/s, AR(1) coefficient (real high-pass sd of
                                    # vEgo 0.006-0.02 m/s, of aEgo 0.04-0.10 m/s^2)
AEGO_NOISE = (0.045, 0.3)           # aEgo = backward diff + white noise, sd lognormal(median, sigma)
                                    # (real residual sd 0.036-0.085)

# Curvature / target lateral acceleration.  Real |target|: mean 0.15, p10 0.003, p90 0.58 m/s^2;
# per-segment mean |target| 0.03-0.58 (lognormal-like, median ~0.08).  Real |target rate| (per-step
# difference / 0.1 s): mean 0.10, p90 0.25 m/s^3; the per-step differences have a lag-1
# autocorrelation of 0.4-0.6 and stay near 0.3 up to lag 6: besides curves there is a weaving
# component with a period of a few seconds (00001: +-0.1 m/s^2, ~5 s) and a small noise.
# All lateral amplitudes below are at the segment's rms speed; kappa = lataccel / v_rms^2.
CURVE_RATE_PER_MIN = 1.6            # Poisson mean number of curves per 60 s
CURVE_SCALE = (0.25, 0.8)           # per-segment curve amplitude: lognormal(median, sigma), m/s^2,
CURVE_SPEED_EXP = 2.0               # ... median times (v_rms / 20 m/s)**this (real highway segments
                                    # have |target| means 0.58/0.22/0.08, city ones 0.03-0.16)
CURVE_SPREAD = 0.5                  # lognormal sigma of single curves around the segment scale
CURVE_RAMP_S = (2.0, 8.0)           # uniform range of a curve's entry / exit ramp, s
CURVE_HOLD_S = (8.0, 0.8)           # lognormal(median, sigma) of a curve's hold, s
LANE_CHANGE_RATE_PER_MIN = 0.4      # Poisson mean number of lane changes per 60 s
LANE_CHANGE_AMP = (0.15, 0.6)       # uniform range of a lane change's peak lataccel, m/s^2
LANE_CHANGE_S = (3.5, 8.0)          # uniform range of a lane change's duration, s
# Short sharp events (00003: -1.1 m/s^2 and back within ~1.5 s; rate spikes of 2.4-3.1 m/s^3 in
# 4 of 8 segments): Poisson mean per 60 s, uniform peak (at 20 m/s, times v_rms / 20 m/s) m/s^2,
# uniform duration s.
SHARP_RATE_PER_MIN = 0.4
SHARP_AMP = (0.2, 1.2)
SHARP_S = (0.8, 3.0)
WEAVE_SD = (0.04, 0.7)              # weaving component: lognormal(median sd, sigma), m/s^2
WEAVE_PERIOD_S = (3.0, 9.0)         # uniform range of the weaving period, s
WEAVE_DAMPING = (0.15, 0.5)         # uniform range of the damping ratio of the weaving
TARGET_NOISE = (0.007, 0.6)         # noise increments per step: lognormal(median sd, sigma), m/s^2
TARGET_NOISE_SPEED_EXP = 0.5        # ... median times (v_rms / 20 m/s)**this
TARGET_NOISE_RHO = (0.1, 0.98)      # AR(1) coefficient of the increments, mean reversion of the level
TARGET_WHITE = 0.004                # white measurement noise sd (times the speed factor ** 0.5)
TARGET_SOFT_LIMIT = 2.5             # v^2 kappa is saturated smoothly (tanh) at this, m/s^2: the real
                                    # segments stay below 1.6; above ~2.5 at highway speed the
                                    # simulator cannot follow and single segments dominate mean costs
TARGET_LIMIT = 5.0                  # the tokenizer range of the simulator

# Roll (rad).  Real per-segment mean roll: 0.000-0.051 (mean 0.023, sd 0.016), within-segment sd
# 0.001-0.03; roll follows the target on banked curves (corr 0.6-0.98 in 5 of 8 segments, e.g.
# 00000: roll_lataccel swings ~0.4 for a target swing of 1 m/s^2); per-step roll change sd
# 0.0002-0.0009 rad.  Pooled roll_lataccel: mean 0.22, p10 -0.06, p90 0.50 m/s^2.
ROLL_BIAS = (0.023, 0.020)          # normal(mean, sd) of the per-segment crown bias, rad
ROLL_DRIFT = (0.010, 12.0)          # slow drift: sd rad, time constant s
ROLL_BANK = (0.0, 0.5)              # uniform range of bank gain (roll_lataccel / target)
ROLL_NOISE = 0.0005                 # sd of the small roll noise, rad (AR(1), coefficient 0.5)
ROLL_LIMIT = 0.1                    # roll is saturated smoothly (tanh) at this, rad (~10% slope)
ROLL_FREEZE_SPEED = 0.5             # roll is held while the speed is below this, m/s

# Warm-up steer.  Least squares on the 800 warm-up rows, simulator sign (steer = -steerCommand),
# with a per-segment offset: steer[k] ~ K * (target[k+L] - roll_lataccel[k+L]) + offset.
# Lead L = 3 steps minimises the residual (sd 0.056/0.049/0.038/0.031/0.023/0.017/0.031 for
# L = -5/-3/-1/0/1/3/5); K = 0.52 at L = 3; a 1/v term changes the residual by <1%, so none.
# Offsets: -0.01, -0.015, 0.011, -0.062, -0.19, 0.065, -0.091, 0.148 (mean -0.02, sd 0.1).
# The residual is smooth (lag-1 autocorrelation 0.74-0.99, sd 0.008-0.028).
STEER_GAIN = 0.52
STEER_LEAD = 3
STEER_OFFSET = (-0.02, 0.10)        # normal(mean, sd)
STEER_NOISE = (0.015, 0.95)         # AR(1): sd, coefficient
STEER_LIMIT = 2.0


CALIBRATION_NAMES = (
    "P_HIGHWAY", "HIGHWAY_LEVEL", "HIGHWAY_STEP", "HIGHWAY_ACCEL", "CITY_LEVEL", "CITY_ACCEL",
    "CITY_DECEL", "MIN_RAMP_S", "HOLD_MEAN_S", "P_STOP", "STOP_HOLD_S", "SPEED_WANDER",
    "SPEED_JITTER", "AEGO_NOISE", "CURVE_RATE_PER_MIN", "CURVE_SCALE", "CURVE_SPEED_EXP",
    "CURVE_SPREAD", "CURVE_RAMP_S", "CURVE_HOLD_S", "LANE_CHANGE_RATE_PER_MIN", "LANE_CHANGE_AMP",
    "LANE_CHANGE_S", "SHARP_RATE_PER_MIN", "SHARP_AMP", "SHARP_S", "WEAVE_SD", "WEAVE_PERIOD_S",
    "WEAVE_DAMPING", "TARGET_NOISE", "TARGET_NOISE_SPEED_EXP", "TARGET_NOISE_RHO", "TARGET_WHITE",
    "TARGET_SOFT_LIMIT", "TARGET_LIMIT", "ROLL_BIAS", "ROLL_DRIFT", "ROLL_BANK", "ROLL_NOISE",
    "ROLL_LIMIT", "ROLL_FREEZE_SPEED",
    "STEER_GAIN", "STEER_LEAD", "STEER_OFFSET", "STEER_NOISE", "STEER_LIMIT",
)


def calibration_parameters() -> dict:
    """The calibration constants (lower-case names), as written into the manifest."""
    g = globals()
    return {n.lower(): list(g[n]) if isinstance(g[n], tuple) else g[n] for n in CALIBRATION_NAMES}


# --------------------------------------------------------------------------------------------
# Signal helpers (vectorised: filters are convolutions with truncated impulse responses)
# --------------------------------------------------------------------------------------------

def _kernel_len(rho: float) -> int:
    return int(np.ceil(np.log(1e-6) / np.log(rho))) + 1


def _ar1(rng: np.random.Generator, n: int, rho: float, sd: float) -> np.ndarray:
    """Stationary AR(1) series of length n with marginal sd ``sd``."""
    if rho <= 0:
        return rng.normal(0.0, sd, n)
    length = _kernel_len(rho)
    e = rng.normal(0.0, sd * np.sqrt(1.0 - rho * rho), n + length)
    return np.convolve(e, rho ** np.arange(length))[length:n + length]


def _drift_noise(rng: np.random.Generator, n: int, rho_inc: float, rho_level: float, sd_inc: float) -> np.ndarray:
    """Slowly mean-reverting noise whose per-step increments are AR(1) with sd ``sd_inc``."""
    length = _kernel_len(rho_level)
    inc = _ar1(rng, n + length, rho_inc, sd_inc)
    return np.convolve(inc, rho_level ** np.arange(length))[length:n + length]


def _oscillator(rng: np.random.Generator, n: int, period: float, damping: float, sd: float) -> np.ndarray:
    """Narrow-band noise: white noise through a damped 2nd-order resonator (period in steps)."""
    w = 2.0 * np.pi / period
    r = np.exp(-damping * w)
    a1, a2 = 2.0 * r * np.cos(w * np.sqrt(max(1.0 - damping**2, 1e-6))), -r * r
    length = int(np.ceil(np.log(1e-6) / np.log(r))) + 2
    h = np.zeros(length)
    h[0] = 1.0
    h[1] = a1
    for i in range(2, length):  # impulse response only (a few hundred steps), not the signal
        h[i] = a1 * h[i - 1] + a2 * h[i - 2]
    e = rng.normal(0.0, 1.0, n + length)
    x = np.convolve(e, h)[length:n + length]
    return x * (sd / max(np.sqrt(np.sum(h * h)), 1e-12))


def _smooth(x: np.ndarray, sigma: float) -> np.ndarray:
    """Gaussian smoothing (sigma in steps) with edge padding."""
    if sigma <= 0:
        return x
    half = int(np.ceil(3 * sigma))
    k = np.exp(-0.5 * (np.arange(-half, half + 1) / sigma) ** 2)
    k /= k.sum()
    return np.convolve(np.pad(x, half, mode="edge"), k, mode="valid")


def _lognormal(rng: np.random.Generator, median_sigma: tuple[float, float]) -> float:
    median, sigma = median_sigma
    return float(median * np.exp(sigma * rng.normal()))


# --------------------------------------------------------------------------------------------
# Segment generation
# --------------------------------------------------------------------------------------------

def _speed_plan(rng: np.random.Generator, n: int) -> np.ndarray:
    """Planned speed (m/s, >= 0): cruise levels joined by smooth cosine ramps."""
    highway = rng.random() < P_HIGHWAY
    if highway:
        level = float(np.clip(rng.normal(*HIGHWAY_LEVEL), *HIGHWAY_RANGE))
    else:
        level = float(rng.uniform(*CITY_LEVEL))
        if rng.random() < 0.5 * P_STOP:  # some segments start from standstill
            level = 0.0
    pieces: list[np.ndarray] = []
    total = 0
    while total < n:
        if level == 0.0:
            hold = rng.uniform(*STOP_HOLD_S)
        else:
            hold = rng.exponential(HOLD_MEAN_S)
        h = max(int(round(hold / DEL_T)), 1)
        pieces.append(np.full(h, level))
        total += h
        if highway:
            new = float(np.clip(level + rng.uniform(-HIGHWAY_STEP, HIGHWAY_STEP), *HIGHWAY_RANGE))
            peak = rng.uniform(*HIGHWAY_ACCEL)
        else:
            if level > 0.0 and rng.random() < P_STOP:
                new = 0.0
            else:
                new = float(rng.uniform(*CITY_LEVEL))
            peak = rng.uniform(*(CITY_ACCEL if new > level else CITY_DECEL))
        dv = new - level
        # cosine ramp v = level + dv (1 - cos(pi s)) / 2 has peak acceleration pi |dv| / (2 T)
        dur = max(np.pi * abs(dv) / (2.0 * peak), MIN_RAMP_S)
        m = max(int(round(dur / DEL_T)), 1)
        s = (np.arange(1, m + 1)) / m
        pieces.append(level + dv * (1.0 - np.cos(np.pi * s)) / 2.0)
        total += m
        level = new
    plan = np.concatenate(pieces)
    # start at a random point of the sequence so a segment may begin mid-manoeuvre
    start = int(rng.integers(0, min(len(plan) - n, 150) + 1))
    return plan[start:start + n]


def generate_segment(rng: np.random.Generator, rows: int = 600) -> dict:
    """One synthetic segment.

    Returns a dict of float64 arrays of length ``rows`` in CSV units: ``t``, ``vEgo``, ``aEgo``,
    ``roll`` (rad), ``targetLateralAcceleration`` and ``steerCommand`` (log sign, left-positive;
    NaN from row 100 on, as the logs are empty there).
    """
    if rows < CONTROL_START_IDX + STEER_LEAD:
        raise ValueError(f"rows must be at least {CONTROL_START_IDX + STEER_LEAD}, got {rows}")
    n = rows + 1  # one extra leading sample for the backward difference of aEgo

    # --- speed ---
    plan = _speed_plan(rng, n)
    moving = np.clip(plan / 3.0, 0.0, 1.0)  # fades wander and jitter out at standstill
    wander = _smooth(_ar1(rng, n, np.exp(-DEL_T / SPEED_WANDER[1]), SPEED_WANDER[0]), 10.0)
    jitter = _ar1(rng, n, SPEED_JITTER[1], SPEED_JITTER[0])
    v_full = np.maximum(plan + (wander + jitter) * moving, 0.0)
    stopped_full = plan <= 0.0
    v_full[stopped_full] = 0.0
    a = np.diff(v_full) / DEL_T + rng.normal(0.0, _lognormal(rng, AEGO_NOISE), rows)
    v = v_full[1:]
    stopped = stopped_full[1:] & stopped_full[:-1]
    a[stopped] = 0.0

    # --- curvature and target ---
    t_idx = np.arange(rows)
    v_rms = max(float(np.sqrt(np.mean(v * v))), 5.0)
    lat = np.zeros(rows)  # lateral acceleration pattern at v_rms
    speed_factor = v_rms / 20.0
    scale = _lognormal(rng, CURVE_SCALE) * speed_factor**CURVE_SPEED_EXP
    minutes = rows * DEL_T / 60.0
    for _ in range(rng.poisson(CURVE_RATE_PER_MIN * minutes)):
        amp = scale * np.exp(CURVE_SPREAD * rng.normal()) * rng.choice((-1.0, 1.0))
        ramp_in, ramp_out = rng.uniform(*CURVE_RAMP_S, size=2) / DEL_T
        hold = _lognormal(rng, CURVE_HOLD_S) / DEL_T
        start = rng.uniform(-ramp_in - hold, rows)
        x = t_idx - start
        up = np.clip(x / ramp_in, 0.0, 1.0)
        down = np.clip((x - ramp_in - hold) / ramp_out, 0.0, 1.0)
        lat += amp * (0.5 - 0.5 * np.cos(np.pi * up)) * (0.5 + 0.5 * np.cos(np.pi * down))
    for _ in range(rng.poisson(LANE_CHANGE_RATE_PER_MIN * minutes)):
        amp = rng.uniform(*LANE_CHANGE_AMP) * rng.choice((-1.0, 1.0))
        dur = rng.uniform(*LANE_CHANGE_S) / DEL_T
        start = rng.uniform(-dur, rows)
        x = (t_idx - start) / dur
        inside = (x >= 0) & (x <= 1)
        lat += np.where(inside, amp * np.sin(2.0 * np.pi * x), 0.0)
    for _ in range(rng.poisson(SHARP_RATE_PER_MIN * minutes)):
        amp = rng.uniform(*SHARP_AMP) * speed_factor * rng.choice((-1.0, 1.0))
        dur = rng.uniform(*SHARP_S) / DEL_T
        x = (t_idx - rng.uniform(-dur, rows)) / dur
        lat += np.where((x >= 0) & (x <= 1), amp * (0.5 - 0.5 * np.cos(2.0 * np.pi * x)), 0.0)
    lat += _oscillator(rng, rows, rng.uniform(*WEAVE_PERIOD_S) / DEL_T, rng.uniform(*WEAVE_DAMPING),
                       _lognormal(rng, WEAVE_SD))
    kappa = lat / v_rms**2
    speed_sq = v * v
    target_clean = TARGET_SOFT_LIMIT * np.tanh(speed_sq * kappa / TARGET_SOFT_LIMIT)
    noise_scale = speed_factor**TARGET_NOISE_SPEED_EXP
    noise = _drift_noise(rng, rows, *TARGET_NOISE_RHO, _lognormal(rng, TARGET_NOISE) * noise_scale)
    noise += rng.normal(0.0, TARGET_WHITE * noise_scale, rows)
    target = target_clean + noise * np.minimum(1.0, speed_sq / 25.0)
    target = np.clip(target, -TARGET_LIMIT, TARGET_LIMIT)

    # --- roll ---
    # The road's drift and noise advance only while moving (a stop does not change the road), so
    # the roll is continuous across a stop; while (nearly) standing the logs hold the last value.
    slow = v < ROLL_FREEZE_SPEED
    road_idx = np.maximum(np.cumsum(~slow) - 1, 0)
    bias = rng.normal(*ROLL_BIAS)
    drift = _smooth(_ar1(rng, rows, np.exp(-DEL_T / ROLL_DRIFT[1]), ROLL_DRIFT[0]), 10.0)
    small = _ar1(rng, rows, 0.5, ROLL_NOISE)
    bank = rng.uniform(*ROLL_BANK) * _smooth(target_clean, 5.0) / ACC_G
    roll = bias + (drift + small)[road_idx] + bank
    roll = ROLL_LIMIT * np.tanh(roll / ROLL_LIMIT)
    if slow.any():
        held = np.maximum.accumulate(np.where(slow, -1, t_idx))
        held[held < 0] = int(np.argmax(~slow)) if (~slow).any() else 0
        roll = roll[held]

    # --- warm-up steer (simulator sign), logged with the opposite sign ---
    roll_lat = np.sin(roll) * ACC_G
    ahead = np.arange(CONTROL_START_IDX) + STEER_LEAD
    steer_sim = STEER_GAIN * (target_clean[ahead] - roll_lat[ahead]) + rng.normal(*STEER_OFFSET)
    steer_sim += _ar1(rng, CONTROL_START_IDX, STEER_NOISE[1], STEER_NOISE[0])
    steer_log = np.full(rows, np.nan)
    steer_log[:CONTROL_START_IDX] = -np.clip(steer_sim, -STEER_LIMIT, STEER_LIMIT)

    return {
        "t": t_idx / 10.0,  # k * 0.1 s, printed as 0.1, 0.2, ... (k / 10 is the closest double)
        "vEgo": v,
        "aEgo": a,
        "roll": roll,
        "targetLateralAcceleration": target,
        "steerCommand": steer_log,
    }


def format_segment(seg: dict) -> str:
    """CSV text of a segment: header, full-precision floats (``repr``), empty steer when NaN."""
    cols = [seg[c].tolist() for c in ("t", "vEgo", "aEgo", "roll", "targetLateralAcceleration")]
    steer = seg["steerCommand"].tolist()
    lines = [HEADER]
    for t, v, a, r, tg, s in zip(*cols, steer):
        lines.append(f"{t!r},{v!r},{a!r},{r!r},{tg!r}," + ("" if s != s else repr(s)))
    return "\n".join(lines) + "\n"


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w", newline="") as f:
        f.write(text)
    os.replace(tmp, path)


def _check_args(out: Path, n: int, seed: int, rows: int) -> None:
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    if not isinstance(rows, (int, np.integer)) or rows < MIN_SEGMENT_ROWS:
        raise ValueError(
            f"rows must be an integer >= {MIN_SEGMENT_ROWS} (the cost window ends at step "
            f"{MIN_SEGMENT_ROWS - 1}), got {rows!r}"
        )
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"{out}: exists and is not a folder; choose another --out")
    if out.is_dir():
        foreign = sorted(p.name for p in out.iterdir() if p.suffix == ".csv" and not FILE_PATTERN.match(p.name))
        if foreign:
            raise FileExistsError(
                f"{out}: holds CSV files that this generator did not write (e.g. {foreign[0]}); "
                f"refusing to mark the folder synthetic. Choose an empty or new --out"
            )


def write_dataset(out: str | Path, n: int, seed: int, rows: int = 600, progress: bool = True) -> list[str]:
    """Write ``n`` synthetic segments ``synth_00000.csv`` ... into ``out`` and the manifest last.

    Files of an earlier run in the same folder with an index >= n are removed, so the folder
    always matches its manifest.  Returns the written file paths (``str(Path(out) / name)``).
    """
    out = Path(out)
    _check_args(out, n, seed, rows)
    out.mkdir(parents=True, exist_ok=True)
    width = max(5, len(str(n - 1)))
    names = [f"synth_{k:0{width}d}.csv" for k in range(n)]
    keep = set(names)
    for p in out.iterdir():
        if FILE_PATTERN.match(p.name) and p.name not in keep:
            p.unlink()
    it = range(n)
    if progress:
        from ..utils.progress import track

        it = track(it, desc=f"synthetic segments -> {out}", unit="file")
    paths = []
    for k in it:
        rng = np.random.default_rng([int(seed), k])
        path = out / names[k]
        _write_atomic(path, format_segment(generate_segment(rng, rows)))
        paths.append(str(path))
    manifest = {
        "generator": GENERATOR_NAME,
        "version": GENERATOR_VERSION,
        "synthetic": True,
        "note": (
            "Synthetic data: generated by a statistical imitation of real comma.ai Controls "
            "Challenge segments (calibrated on 8 real segments). Not real driving logs; costs on "
            "this data are not comparable with official scores."
        ),
        "seed": int(seed),
        "n": int(n),
        "rows": int(rows),
        "file_pattern": f"synth_{{k:0{width}d}}.csv",
        "rng": "numpy.random.default_rng([seed, k]) for file k",
        "parameters": calibration_parameters(),
    }
    _write_atomic(out / SYNTHETIC_MANIFEST, json.dumps(manifest, indent=2) + "\n")
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ppo_training.data.synth",
        description="Generate synthetic TinyPhysics segments (labelled synthetic by a manifest).",
    )
    parser.add_argument("--n", type=int, required=True, help="number of segments to write")
    parser.add_argument("--out", required=True, help="output folder (created; e.g. data/synthetic)")
    parser.add_argument("--seed", type=int, default=0, help="base seed (file k uses [seed, k])")
    parser.add_argument("--rows", type=int, default=600, help=f"rows per segment (>= {MIN_SEGMENT_ROWS})")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    try:
        paths = write_dataset(args.out, args.n, args.seed, rows=args.rows, progress=not args.no_progress)
    except (ValueError, FileExistsError) as exc:
        parser.exit(2, f"error: {exc}\n")
    print(f"wrote {len(paths)} synthetic segments and {SYNTHETIC_MANIFEST} to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())


def synthetic_segments(n: int, seed: int = 0, rows: int = 600, prefix: str = "synthetic") -> list:
    """``n`` synthetic segments in memory (no files), as :class:`~ppo_training.data.segments.Segment`.

    Their path strings are ``<prefix>/synth_<k>.csv`` (the seed keys), as if written by
    :func:`write_dataset` into ``<prefix>``; for benchmarks that need more segments than are
    worth writing to disk.
    """
    from .segments import Segment

    out = []
    for k in range(n):
        d = generate_segment(np.random.default_rng([seed, k]), rows)
        out.append(Segment(path=f"{prefix}/synth_{k:05d}.csv", roll_lataccel=np.sin(d["roll"]) * ACC_G,
                           v_ego=d["vEgo"], a_ego=d["aEgo"], target_lataccel=d["targetLateralAcceleration"],
                           steer_command=-d["steerCommand"]))
    return out
