"""PPO steering workbench for the comma.ai Controls Challenge (TinyPhysics)."""
from __future__ import annotations

import os
from pathlib import Path

#: Environment variable that names the project folder explicitly (any kind of install).
PROJECT_ROOT_ENV = "PPO_PROJECT_ROOT"


def find_project_root(package_dir: str | Path | None = None, environ: dict | None = None) -> Path:
    """The folder holding ``models/``, ``data/``, ``runs/`` and ``config.yaml``.

    ``$PPO_PROJECT_ROOT`` when set; else the checkout this package lives in (running from the
    source tree or after ``pip install -e .``: the parent of the package has ``pyproject.toml``);
    else, for a regular ``pip install .`` into site-packages, the current working directory.
    """
    environ = os.environ if environ is None else environ
    if environ.get(PROJECT_ROOT_ENV):
        return Path(environ[PROJECT_ROOT_ENV]).expanduser().resolve()
    checkout = Path(package_dir or Path(__file__).parent).resolve().parent
    if (checkout / "pyproject.toml").is_file():
        return checkout
    return Path.cwd().resolve()


#: Project folder (see :func:`find_project_root`), fixed when the package is imported.
PROJECT_ROOT = find_project_root()

__all__ = ["PROJECT_ROOT", "PROJECT_ROOT_ENV", "find_project_root"]
