"""The trained actor's deterministic action in plain numpy (float64).

This is the inference path of evaluation *and* of the exported official-format controller (its
source is copied into the exported file), so the two compute bit-identical actions.  Each dense
layer accumulates its dot products one input at a time in a fixed order (no BLAS), which makes a
row's result independent of how many rows are evaluated together.
"""
import numpy as np


def _dense(x, weight, bias):
    """``x @ weight.T + bias`` with a fixed, batch-independent summation order."""
    y = np.zeros((x.shape[0], weight.shape[0]))
    for k in range(weight.shape[1]):
        y = y + x[:, k : k + 1] * weight[:, k]
    return y + bias


def _softplus(x):
    # torch.nn.functional.softplus with its default threshold of 20
    return np.where(x > 20.0, x, np.log1p(np.exp(np.minimum(x, 20.0))))


class NumpyPolicy:
    """Deterministic actor: observation normalisation, MLP, distribution mean mapped to [-1, 1].

    Args:
        layers: ``[(weight [out, in], bias [out]), ...]`` float64, the actor's linear layers.
        activation: ``"tanh"`` or ``"relu"`` between layers.
        distribution: ``"beta"`` (action ``2 * alpha / (alpha + beta) - 1``, ``alpha, beta =
            softplus(out) + 1``) or ``"squashed_gaussian"`` (action ``tanh(mean)``).
        obs_mean, obs_std: observation standardisation, ``sqrt(running var + 1e-8)`` for the std
            (None: no normalisation).
        skip: ``[out, in]`` weight of the linear map from the standardised observation added to
            the last layer's output (None: none).
    """

    def __init__(self, layers, activation, distribution, obs_mean=None, obs_std=None, obs_clip=10.0, skip=None):
        self.layers = [(np.asarray(w, dtype=np.float64), np.asarray(b, dtype=np.float64)) for w, b in layers]
        self.activation = activation
        self.distribution = distribution
        self.obs_mean = None if obs_mean is None else np.asarray(obs_mean, dtype=np.float64)
        self.obs_std = None if obs_std is None else np.asarray(obs_std, dtype=np.float64)
        self.obs_clip = obs_clip
        self.skip = None if skip is None else np.asarray(skip, dtype=np.float64)

    def action(self, obs):
        """Deterministic normalised actions ``[B]`` in [-1, 1] of observations ``[B, obs_dim]``."""
        x = np.asarray(obs, dtype=np.float64)
        if self.obs_mean is not None:
            x = np.clip((x - self.obs_mean) / self.obs_std, -self.obs_clip, self.obs_clip)
        inputs = x
        for k, (w, b) in enumerate(self.layers):
            x = _dense(x, w, b)
            if k < len(self.layers) - 1:
                x = np.tanh(x) if self.activation == "tanh" else np.maximum(x, 0.0)
        if self.skip is not None:
            x = x + _dense(inputs, self.skip, np.zeros(self.skip.shape[0]))
        if self.distribution == "beta":
            alpha, beta = _softplus(x[:, 0]) + 1.0, _softplus(x[:, 1]) + 1.0
            return 2.0 * (alpha / (alpha + beta)) - 1.0
        return np.tanh(x[:, 0])

    # -- serialisation (plain arrays, no pickle) ------------------------------------------------------
    def to_arrays(self):
        out = {"activation": np.array(self.activation), "distribution": np.array(self.distribution),
               "n_layers": np.array(len(self.layers)), "obs_clip": np.array(self.obs_clip)}
        for k, (w, b) in enumerate(self.layers):
            out[f"w{k}"], out[f"b{k}"] = w, b
        if self.obs_mean is not None:
            out["obs_mean"], out["obs_std"] = self.obs_mean, self.obs_std
        if self.skip is not None:
            out["skip"] = self.skip
        return out

    @classmethod
    def from_arrays(cls, arrays):
        layers = [(arrays[f"w{k}"], arrays[f"b{k}"]) for k in range(int(arrays["n_layers"]))]
        norm = "obs_mean" in arrays
        return cls(layers, str(arrays["activation"]), str(arrays["distribution"]),
                   arrays["obs_mean"] if norm else None, arrays["obs_std"] if norm else None,
                   float(arrays["obs_clip"]), arrays["skip"] if "skip" in arrays else None)
