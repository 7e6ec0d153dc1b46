"""The project installs as a package: metadata, pinned dependencies, console scripts, project root."""
from __future__ import annotations

import importlib.metadata
import json
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

import ppo_training
from ppo_training import PROJECT_ROOT, find_project_root

PYPROJECT = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())
SCRIPTS = {
    "ppo-train": "ppo_training.cli.train:main",
    "ppo-eval": "ppo_training.cli.evaluate:main",
    "ppo-export": "ppo_training.export:main",
    "ppo-assets": "ppo_training.assets:main",
}


def pins(lines: list[str]) -> dict[str, str]:
    """``name (lower case) -> full requirement`` of ``name==version`` lines; comments skipped."""
    out = {}
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if line:
            m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==(\S+)", line)
            assert m, f"not an exact pin: {line!r}"
            out[m.group(1).lower()] = line
    return out


def test_metadata_and_dependencies_match_requirements():
    project = PYPROJECT["project"]
    assert project["name"] and project["version"] and project["description"]
    assert project["requires-python"] == ">=3.11"
    runtime = pins(project["dependencies"])
    extras = {k: pins(v) for k, v in project["optional-dependencies"].items()}
    required = pins((PROJECT_ROOT / "requirements.txt").read_text().splitlines())
    # Every runtime dependency is pinned exactly as in requirements.txt ...
    for name, req in runtime.items():
        assert required.get(name) == req, f"pyproject {req!r} vs requirements.txt {required.get(name)!r}"
    # ... and every line of requirements.txt is a runtime dependency or in an extra, with the same pin.
    declared = {**runtime, **{n: r for e in extras.values() for n, r in e.items()}}
    assert declared == required
    assert {"numpy", "torch", "onnxruntime", "pandas", "pyyaml"} <= set(runtime)
    assert "pytest" not in runtime and "jupyterlab" not in runtime
    assert PYPROJECT["project"]["scripts"] == SCRIPTS


def test_every_package_folder_is_a_regular_package():
    # Automatic package discovery only finds folders with __init__.py.
    for folder in {p.parent for p in Path(ppo_training.__file__).parent.rglob("*.py")}:
        assert (folder / "__init__.py").is_file(), f"{folder} has no __init__.py"


def test_console_scripts_resolve_and_show_help(capsys):
    eps = {ep.name: ep for ep in importlib.metadata.entry_points(group="console_scripts") if ep.name in SCRIPTS}
    assert {n: ep.value for n, ep in eps.items()} == SCRIPTS, "run `pip install -e .` (make setup)"
    for name, ep in eps.items():
        with pytest.raises(SystemExit) as exit_info:
            ep.load()(["--help"])
        assert exit_info.value.code == 0, name
        assert "usage:" in capsys.readouterr().out, name


@pytest.fixture(scope="module")
def source_copy(tmp_path_factory) -> Path:
    """The files a build reads, copied so that building writes nothing into the checkout."""
    root = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(PROJECT_ROOT / name, root / name)
    shutil.copytree(PROJECT_ROOT / "ppo_training", root / "ppo_training",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _pip(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", *args, "--no-deps", "--no-build-isolation",
                           "--no-index", "--quiet"], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_pip_install_metadata_is_valid(source_copy):
    r = _pip("install", "--dry-run", "--report", "-", ".", cwd=source_copy)
    assert r.returncode == 0, r.stderr
    meta = json.loads(r.stdout)["install"][0]["metadata"]
    assert meta["name"] == PYPROJECT["project"]["name"] and meta["requires_python"] == ">=3.11"
    assert "torch==2.13.0" in meta["requires_dist"]


def test_wheel_holds_every_subpackage_and_runs_from_site_packages(source_copy, tmp_path):
    r = _pip("wheel", "-w", str(tmp_path / "dist"), ".", cwd=source_copy)
    assert r.returncode == 0, r.stderr
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for sub in ("cli", "controllers", "data", "environment", "policy", "sim", "utils"):
        assert f"ppo_training/{sub}/__init__.py" in names, sub
    assert not any(n.startswith(("tests/", "bench/")) for n in names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "ppo-train = ppo_training.cli.train:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
    # Installed outside a checkout, the project root is the working directory.
    target, work = tmp_path / "site", tmp_path / "work"
    work.mkdir()
    assert _pip("install", "--target", str(target), str(wheel), cwd=tmp_path).returncode == 0
    out = subprocess.run([sys.executable, "-S", "-c", "import ppo_training as p; print(p.__file__); print(p.PROJECT_ROOT)"],
                         cwd=work, env={"PYTHONPATH": str(target)}, capture_output=True, text=True, check=True)
    where, root = out.stdout.split()
    assert Path(where).is_relative_to(target) and Path(root) == work.resolve()


def test_project_root_rules(tmp_path, monkeypatch):
    assert PROJECT_ROOT == Path(ppo_training.__file__).resolve().parent.parent  # checkout / editable
    installed = tmp_path / "site-packages" / "ppo_training"
    installed.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert find_project_root(installed, environ={}) == tmp_path.resolve()
    assert find_project_root(installed, environ={"PPO_PROJECT_ROOT": str(tmp_path / "p")}) == tmp_path / "p"
