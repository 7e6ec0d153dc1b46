"""Export a trained policy as a controller for the official challenge harness.

    python -m ppo_training.export --model_path runs/NAME/checkpoints/best.pt --out DIR [--name ppo_policy]

writes ``DIR/controllers/<name>.py`` and its weights ``DIR/controllers/<name>.npz``.  Copy both
into the ``controllers/`` folder of a challenge checkout and run
``python tinyphysics.py --model_path ./models/tinyphysics.onnx --data_path ./data --num_segs 100
--controller <name>``.

The controller needs only numpy and the standard library, plus onnxruntime when the policy uses
the model prediction (``env.prediction``): it then loads the simulator model from
``$TINYPHYSICS_MODEL``, or ``models/tinyphysics.onnx`` of the challenge checkout it sits in.  Its
feature, prediction and policy code is the project's own (``environment/features.py``,
``sim/prediction.py`` and ``policy/numpy_policy.py`` are copied into the file verbatim), so it
computes exactly the observations and actions of this project's evaluation, call by call, and its
costs equal ``eval.py --model_path`` on the same segment paths.  It never uses numpy's global
random generator (which the official simulator samples from).
"""
from __future__ import annotations

import argparse
import inspect
import re
import sys
from pathlib import Path

import numpy as np

from .environment import features
from .policy import numpy_policy
from .sim import prediction
from .utils.checkpoint import CheckpointError

CONTROLLER_TEMPLATE = '''
ACTION_MODE = {action_mode!r}
MAX_DELTA = {max_delta!r}
OBSERVATION = {observation!r}
PREDICTION = {prediction!r}
CORRECTION = {correction!r}
CONTROL_START_IDX = 100
FIRST_CALL_STEP = 20
_HERE = os.path.dirname(os.path.abspath(__file__))
_WEIGHTS = os.path.join(_HERE, {weights!r})


def _simulator_model_path():
  """$TINYPHYSICS_MODEL, else models/tinyphysics.onnx of the checkout (or working folder)."""
  for path in (os.environ.get("TINYPHYSICS_MODEL"), os.path.join(_HERE, "..", "models", "tinyphysics.onnx"),
               os.path.join("models", "tinyphysics.onnx")):
    if path and os.path.isfile(path):
      return path
  raise FileNotFoundError("this controller needs the TinyPhysics model: set TINYPHYSICS_MODEL or run it from "
                          "a challenge checkout with models/tinyphysics.onnx")


class Controller(BaseController):
  """PPO steering policy; exported from checkpoint {source!r}."""

  def __init__(self):
    with np.load(_WEIGHTS, allow_pickle=False) as f:
      self.policy = NumpyPolicy.from_arrays(dict(f))
    self.features = FeatureState(1, kind=OBSERVATION, prediction=PREDICTION)
    self.predictor = OnnxPredictor(_simulator_model_path()) if PREDICTION else None
    self.step = FIRST_CALL_STEP  # the harness calls update once per step from step 20 on

  def update(self, target_lataccel, current_lataccel, state, future_plan):
    step = self.step
    self.step += 1
    obs = self.features.observe(
      np.array([target_lataccel], dtype=np.float64),
      np.array([current_lataccel], dtype=np.float64),
      np.array([state.roll_lataccel], dtype=np.float64),
      np.array([state.v_ego], dtype=np.float64),
      np.array([state.a_ego], dtype=np.float64),
      plan_row(future_plan.lataccel, target_lataccel),
      plan_row(future_plan.roll_lataccel, state.roll_lataccel),
      plan_row(future_plan.v_ego, state.v_ego),
      plan_row(future_plan.a_ego, state.a_ego) if OBSERVATION == "rich" else None,
      predict=self.predictor if step >= CONTROL_START_IDX else None,  # warm-up outputs are discarded
    )
    if step < CONTROL_START_IDX:
      out = self.features.teacher  # discarded by the harness; keeps the feature state as in training
    else:
      out = action_to_steer(self.policy.action(obs), self.features.last_action, ACTION_MODE, MAX_DELTA,
                            self.features.teacher, offset=model_correction(self.features, CORRECTION))
    self.features.record(out)
    return float(out[0])
'''


def _module_body(module) -> str:
    """A module's source without its ``from __future__`` line (the exported file has one on top)."""
    src = inspect.getsource(module)
    return re.sub(r"^from __future__ import annotations\n", "", src, flags=re.M)


def export_policy(model_path: str | Path, out_dir: str | Path, name: str = "ppo_policy") -> Path:
    """Write ``out_dir/controllers/<name>.py`` and ``<name>.npz``; returns the .py path."""
    from .controllers.policy import PolicyController

    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError(f"--name {name!r} must be a Python identifier (it becomes a module name)")
    ctrl = PolicyController.from_checkpoint(model_path)
    folder = Path(out_dir) / "controllers"
    folder.mkdir(parents=True, exist_ok=True)
    weights = folder / f"{name}.npz"
    tmp_w = folder / f".{name}.npz.tmp"
    with open(tmp_w, "wb") as f:
        np.savez(f, **ctrl.policy.to_arrays())
    header = (
        f'"""PPO steering controller for the comma.ai Controls Challenge (exported by ppo_training).\n\n'
        f"Drop this file and {weights.name} into controllers/ and run the harness with --controller {name}.\n"
        f'Needs numpy (and onnxruntime when it uses the model prediction)."""\n'
        "from __future__ import annotations\n\nimport os\n\nimport numpy as np\n\n"
        "try:\n  from . import BaseController\nexcept ImportError:  # loaded outside a controllers package\n"
        "  BaseController = object\n\n"
        "# ---- observation features: ppo_training/environment/features.py ----\n"
    )
    body = (
        header + _module_body(features)
        + "\n\n# ---- model prediction: ppo_training/sim/prediction.py ----\n" + _module_body(prediction)
        + "\n\n# ---- deterministic actor: ppo_training/policy/numpy_policy.py ----\n" + _module_body(numpy_policy)
        + CONTROLLER_TEMPLATE.format(action_mode=ctrl.cfg.action_mode, max_delta=float(ctrl.cfg.max_delta),
                                     observation=ctrl.cfg.observation, prediction=bool(ctrl.cfg.prediction),
                                     correction=float(ctrl.cfg.correction), weights=weights.name,
                                     source=Path(model_path).name)
    )
    py = folder / f"{name}.py"
    tmp_py = folder / f".{name}.py.tmp"
    tmp_py.write_text(body)
    tmp_w.replace(weights)
    tmp_py.replace(py)
    if not (folder / "__init__.py").exists():
        # Lets the file be imported from DIR like the challenge repository's controllers package.
        (folder / "__init__.py").write_text(
            "class BaseController:\n  def update(self, target_lataccel, current_lataccel, state, future_plan):\n"
            "    raise NotImplementedError\n")
    return py


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model_path", required=True, help="a training checkpoint (.pt)")
    p.add_argument("--out", required=True, help="output folder; the controller goes to OUT/controllers/")
    p.add_argument("--name", default="ppo_policy", help="controller module name (default: ppo_policy)")
    args = p.parse_args(argv)
    try:
        py = export_policy(args.model_path, args.out, args.name)
    except (CheckpointError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {py} and {py.with_suffix('.npz')}")
    print(f"official harness: copy both into controllers/ and run --controller {args.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
