"""The TinyPhysics model's expected next lateral acceleration, from what a controller has seen.

A controller that keeps its own last 20 outputs, the last 20 lateral accelerations it was shown
and the last 20 states (roll, speed, forward acceleration) can build the model's input for the
next step itself and ask the model what it expects: the mean and spread of the next lateral
acceleration under the sampling distribution (``softmax(logits / 0.8)`` over the token values,
clipped to ``current ± 0.5`` like the simulator clips).  Nothing is sampled, so no random stream
is touched.

Plain numpy (plus onnxruntime in :class:`OnnxPredictor`): this file is copied verbatim into
exported controllers, so evaluation and the official harness compute the same numbers.  Row-wise
the arithmetic does not depend on the batch size.
"""
import numpy as np

PREDICTION_TEMPERATURE = 0.8
PREDICTION_BINS = np.linspace(-5.0, 5.0, 1024)
PREDICTION_MAX_DELTA = 0.5
PREDICTION_CONTEXT = 20


def prediction_inputs(actions, states, lataccels):
    """The model's inputs (states float32 ``[B, 20, 4]``, tokens int64 ``[B, 20]``).

    Args:
        actions: float64 ``[B, 20]`` steer commands of steps i-19 .. i (the last one a candidate).
        states: float64 ``[B, 20, 3]`` roll lateral acceleration, speed, forward acceleration of
            steps i-19 .. i.
        lataccels: float64 ``[B, 20]`` lateral accelerations of steps i-20 .. i-1.
    """
    b = actions.shape[0]
    st = np.empty((b, PREDICTION_CONTEXT, 4), dtype=np.float32)
    st[:, :, 0] = actions
    st[:, :, 1:] = states
    tokens = np.digitize(np.clip(lataccels, -5.0, 5.0), PREDICTION_BINS, right=True).astype(np.int64)
    return st, tokens


def next_moments(logits, current):
    """Mean and standard deviation (float64 ``[B]``, m/s^2) of the next lateral acceleration.

    Args:
        logits: float32 ``[B, 1024]`` last-position logits.
        current: float64 ``[B]`` current lateral acceleration (the clip centre).
    """
    x = np.asarray(logits, dtype=np.float32) / np.float32(PREDICTION_TEMPERATURE)
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    p = (e / np.sum(e, axis=-1, keepdims=True)).astype(np.float64)
    values = np.clip(PREDICTION_BINS[None, :], (current - PREDICTION_MAX_DELTA)[:, None],
                     (current + PREDICTION_MAX_DELTA)[:, None])
    total = np.sum(p, axis=-1)
    mean = np.sum(p * values, axis=-1) / total
    var = np.sum(p * (values - mean[:, None]) ** 2, axis=-1) / total
    return mean, np.sqrt(var)


class OnnxPredictor:
    """Expected next lateral acceleration with an onnxruntime session on the TinyPhysics model.

    Args:
        model_path: the ONNX file (the challenge's ``models/tinyphysics.onnx``).
    """

    def __init__(self, model_path):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        with open(model_path, "rb") as f:
            self.session = ort.InferenceSession(f.read(), options, ["CPUExecutionProvider"])

    def __call__(self, actions, states, lataccels, current):
        st, tokens = prediction_inputs(actions, states, lataccels)
        logits = self.session.run(None, {"states": st, "tokens": tokens})[0][:, -1, :]
        return next_moments(logits, current)
