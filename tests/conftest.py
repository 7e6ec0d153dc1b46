"""Shared fixtures: the TinyPhysics model and the real segments, located like a user would have them."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from ppo_training import PROJECT_ROOT

SHARED = PROJECT_ROOT.parent / "shared" / "tinyphysics"


def _asset_roots() -> list[Path]:
    roots = [PROJECT_ROOT]
    if os.environ.get("TINYPHYSICS_ASSETS"):
        roots.append(Path(os.environ["TINYPHYSICS_ASSETS"]))
    roots.append(SHARED)
    return roots


def _find(rel: str) -> Path:
    for root in _asset_roots():
        if (root / rel).exists():
            return root / rel
    pytest.fail(
        f"{rel} not found under {', '.join(map(str, _asset_roots()))}; run "
        f"`python -m ppo_training.assets fetch --from DIR` (or `make test`) first"
    )


@pytest.fixture(scope="session")
def model_path() -> Path:
    return _find("models/tinyphysics.onnx")


@pytest.fixture(scope="session")
def real_files_src() -> list[Path]:
    """The eight real segments shipped with the challenge assets (never synthetic ones)."""
    for root in _asset_roots():
        files = sorted((root / "data").glob("0000[0-7].csv"))
        if len(files) == 8:
            return files
    pytest.fail("the eight real segments data/00000.csv .. 00007.csv were not found; fetch the assets")


@pytest.fixture(scope="session")
def train_files_src() -> list[Path]:
    """Four real segments of the training region (05000.csv on): what tests may train on."""
    for root in _asset_roots():
        files = sorted((root / "data").glob("05*.csv"))[:4]
        if len(files) == 4:
            return files
    pytest.fail("no training-region segments (data/05000.csv ...) were found; fetch the assets")


def _workdir_with_data(tmp_path: Path, files: list[Path], monkeypatch) -> Path:
    """``tmp_path`` as the working directory, its ``data/`` holding copies of ``files``."""
    data = tmp_path / "data"
    data.mkdir()
    for f in files:
        shutil.copy(f, data / f.name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture()
def in_train_dir(tmp_path, train_files_src, monkeypatch) -> Path:
    """A working directory whose ``data/`` holds four training-region segments."""
    return _workdir_with_data(tmp_path, train_files_src, monkeypatch)


@pytest.fixture()
def in_data_dir(tmp_path, real_files_src, monkeypatch) -> Path:
    """A working directory holding ``data/`` with the real segments, so paths read ``data/0000k.csv``."""
    return _workdir_with_data(tmp_path, real_files_src, monkeypatch)


@pytest.fixture(scope="session")
def onnx_backend(model_path):
    from ppo_training.sim.backends import OnnxBackend

    return OnnxBackend(model_path)


@pytest.fixture(scope="session")
def reference_session(model_path):
    """A batch-1, single-thread onnxruntime session, configured like the official harness."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(str(model_path), options, ["CPUExecutionProvider"])
