"""Controllers: batched baselines, the batched interface, and the official-format adapter."""
from __future__ import annotations

from pathlib import Path

from ..sim.control import BatchedController
from .classic import PIDController, ZeroController
from .official import OfficialControllerAdapter, find_official_controller, load_official_controller
from .policy import TeacherController

#: ``teacher`` is the PID + feedforward controller that training clones (its reference line).
BUILTIN = {"pid": PIDController, "zero": ZeroController, "teacher": TeacherController}


def make_controller(name: str, search_dirs: tuple[str | Path, ...] = ("controllers",)) -> BatchedController:
    """A controller by name: ``pid``, ``zero``, ``teacher``, or an official-format module.

    An official-format controller is given as a path to its ``.py`` file, or as ``<name>`` found at
    ``controllers/<name>.py`` relative to the working directory (as in the challenge repository).
    """
    if name in BUILTIN:
        return BUILTIN[name]()
    path = find_official_controller(name, search_dirs)
    if path is None:
        raise ValueError(
            f"unknown controller {name!r}: expected one of {', '.join(BUILTIN)}, a path to an "
            f"official-format controller .py file, or a name found as controllers/<name>.py"
        )
    return OfficialControllerAdapter.from_path(path)


__all__ = [
    "BUILTIN",
    "BatchedController",
    "OfficialControllerAdapter",
    "PIDController",
    "TeacherController",
    "ZeroController",
    "find_official_controller",
    "load_official_controller",
    "make_controller",
]
