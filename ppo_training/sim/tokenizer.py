"""Lateral-acceleration tokenizer of the TinyPhysics model.

``bins = linspace(-5, 5, 1024)`` in float64; ``encode(x) = digitize(clip(x, -5, 5), bins,
right=True)`` and ``decode(k) = bins[k]``.  Decoding must use the float64 bins: a float32 decode
visibly changes scores.
"""
import numpy as np

from ..constants import LATACCEL_RANGE, VOCAB_SIZE

#: Token centres, float64, shape [1024].
BINS = np.linspace(LATACCEL_RANGE[0], LATACCEL_RANGE[1], VOCAB_SIZE)


def encode(lataccel: np.ndarray) -> np.ndarray:
    """Tokens (int64, same shape) of lateral accelerations in m/s^2."""
    clipped = np.clip(lataccel, LATACCEL_RANGE[0], LATACCEL_RANGE[1])
    return np.digitize(clipped, BINS, right=True).astype(np.int64)


def decode(tokens: np.ndarray) -> np.ndarray:
    """Lateral accelerations (float64, m/s^2) of tokens."""
    return BINS[tokens]
