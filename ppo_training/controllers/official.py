"""Run controllers written for the official harness (``controllers/<name>.py``).

Such a module defines ``class Controller(BaseController)`` with
``update(target_lataccel, current_lataccel, state, future_plan) -> float`` and usually starts with
``from . import BaseController``.  :func:`load_official_controller` imports it as
``controllers.<name>``: with the folder's own ``controllers/__init__.py`` when it has one (a
checkout of the challenge repository), otherwise with a stand-in package that provides
``BaseController``.  :class:`OfficialControllerAdapter` keeps one instance per segment and calls it
with the same argument types as the harness (numpy float64 scalars, ``State`` and ``FuturePlan``
namedtuples of Python lists).

Note: in the official harness the controller shares numpy's global generator with the simulator,
so a controller that calls ``np.random`` changes the simulator's noise there.  This engine draws
from private per-segment generators, so such a controller scores differently here.
"""
from __future__ import annotations

import importlib.util
import sys
import types
from collections import namedtuple
from pathlib import Path

import numpy as np

from ..sim.control import BatchedController, ControlInputs

State = namedtuple("State", ["roll_lataccel", "v_ego", "a_ego"])
FuturePlan = namedtuple("FuturePlan", ["lataccel", "roll_lataccel", "v_ego", "a_ego"])


class BaseController:
    """Stand-in for the official ``controllers.BaseController``."""

    def update(self, target_lataccel, current_lataccel, state, future_plan):
        raise NotImplementedError


def find_official_controller(name_or_path: str, search_dirs: tuple[str | Path, ...] = ("controllers",)) -> Path | None:
    """The file of an official-format controller: a ``.py`` path, or ``<dir>/<name>.py``."""
    p = Path(name_or_path)
    if p.suffix == ".py":
        return p if p.is_file() else None
    for d in search_dirs:
        candidate = Path(d) / f"{name_or_path}.py"
        if candidate.is_file():
            return candidate
    return None


def load_official_controller(path: str | Path) -> type:
    """Import an official-format controller module and return its ``Controller`` class."""
    path = Path(path).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such controller file")
    folder = path.parent
    package = f"_official_controllers_{abs(hash(str(folder))):x}"
    if package not in sys.modules:
        init = folder / "__init__.py"
        if init.is_file():
            spec = importlib.util.spec_from_file_location(package, init, submodule_search_locations=[str(folder)])
            pkg = importlib.util.module_from_spec(spec)
            sys.modules[package] = pkg
            spec.loader.exec_module(pkg)
        else:
            pkg = types.ModuleType(package)
            pkg.__path__ = [str(folder)]
            pkg.BaseController = BaseController
            sys.modules[package] = pkg
    module_name = f"{package}.{path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[module_name]
        raise ImportError(f"{path}: importing the controller failed: {exc!r}") from exc
    cls = getattr(module, "Controller", None)
    if cls is None or not callable(getattr(cls, "update", None)):
        raise ImportError(f"{path}: expected a class Controller with an update(...) method")
    return cls


class OfficialControllerAdapter(BatchedController):
    """Runs an official-format controller class with one instance per segment."""

    def __init__(self, controller_cls: type, name: str | None = None) -> None:
        self.controller_cls = controller_cls
        self.name = name or getattr(controller_cls, "__module__", "official").rsplit(".", 1)[-1]

    @classmethod
    def from_path(cls, path: str | Path) -> "OfficialControllerAdapter":
        return cls(load_official_controller(path), name=Path(path).stem)

    def reset(self, batch_size: int) -> None:
        self.instances = [self.controller_cls() for _ in range(batch_size)]

    def reset_rows(self, rows: np.ndarray) -> None:
        for b in np.arange(len(self.instances))[rows]:
            self.instances[b] = self.controller_cls()

    def __call__(self, inputs: ControlInputs) -> np.ndarray:
        target = np.asarray(inputs.target)
        current = np.asarray(inputs.current)
        roll, v, a = np.asarray(inputs.roll_lataccel), np.asarray(inputs.v_ego), np.asarray(inputs.a_ego)
        n_plan = inputs.future_length
        plan = [np.asarray(x) for x in (inputs.future_lataccel, inputs.future_roll_lataccel,
                                        inputs.future_v_ego, inputs.future_a_ego)]
        out = np.empty(len(self.instances))
        for b, ctrl in enumerate(self.instances):
            k = n_plan[b]
            fp = FuturePlan(*(p[b, :k].tolist() for p in plan))
            out[b] = ctrl.update(target[b], current[b], State(roll[b], v[b], a[b]), fp)
        return out
