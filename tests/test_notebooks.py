"""Notebooks: committed without outputs, run under papermill, equal to train.py, live in JupyterLab."""
from __future__ import annotations

import json
import shutil
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import yaml

from ppo_training import PROJECT_ROOT
from ppo_training.training import load_config, train
from ppo_training.utils.checkpoint import load_checkpoint

NOTEBOOKS = sorted((PROJECT_ROOT / "notebooks").glob("*.ipynb"))
TIMING_STATS = ("charts__env_steps_per_second",)


def test_notebooks_committed_without_outputs():
    assert [p.name for p in NOTEBOOKS] == ["01_simulator.ipynb", "02_train_ppo.ipynb", "03_evaluate.ipynb",
                                           "04_sweeps.ipynb"]
    for path in NOTEBOOKS:
        nb = json.loads(path.read_text())
        params = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
        assert len(params) == 1, f"{path.name}: exactly one cell tagged 'parameters'"
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                assert cell["outputs"] == [] and cell["execution_count"] is None, f"{path.name} has outputs"


@pytest.fixture()
def nb_env(in_data_dir, train_files_src, model_path, monkeypatch):
    """A folder with data/ (the eight evaluation segments, which never train, and four training-region
    ones) and a tiny training config; kernels import the installed package."""
    monkeypatch.setenv("MPLBACKEND", "Agg")
    for f in train_files_src:
        shutil.copy(f, in_data_dir / "data" / f.name)
    cfg = load_config(None, {
        "data.path": "data", "data.val_fraction": 0.0, "data.test_fraction": 0.0,
        "data.val_segments": 2, "env.n_envs": 2, "train.total_timesteps": 1600, "train.eval_every": 1,
        "train.checkpoint_every": 1, "bc.episodes": 1, "bc.epochs": 2, "logging.progress": False,
        "device": "cpu", "runs_dir": str(in_data_dir / "runs"), "tinyphysics_model": str(model_path),
    })
    path = in_data_dir / "tiny.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return in_data_dir, path


def _papermill(nb: str, out: Path, cwd: Path, **params) -> dict:
    import papermill as pm

    pm.execute_notebook(str(PROJECT_ROOT / "notebooks" / nb), str(out), parameters=params, cwd=str(cwd),
                        kernel_name="python3", progress_bar=False)
    return json.loads(out.read_text())


def _images(nb: dict) -> int:
    return sum("image/png" in o.get("data", {}) for c in nb["cells"] if c["cell_type"] == "code" for o in c["outputs"])


def _stream_text(nb: dict) -> str:
    return "".join("".join(o.get("text", "")) for c in nb["cells"] if c["cell_type"] == "code"
                   for o in c["outputs"] if o.get("output_type") == "stream")


def test_notebooks_run_under_papermill_and_match_train_py(nb_env, monkeypatch):
    root, config = nb_env
    # Training progress on: under papermill it must come as plain lines, not bar frames.
    cfg = yaml.safe_load(config.read_text())
    cfg["logging"]["progress"] = True
    config.write_text(yaml.safe_dump(cfg))
    for var in ("PPO_PROGRESS", "JPY_SESSION_NAME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PPO_PROGRESS_INTERVAL", "0.001")
    from ppo_training.data.synth import write_dataset

    write_dataset(root / "synthetic", 4, seed=0, progress=False)
    nb1 = _papermill("01_simulator.ipynb", root / "out1.ipynb", root, data_path="data", num_segs=2,
                     synthetic_path="synthetic", n_synthetic=4)
    assert _images(nb1) >= 3

    nb2 = _papermill("02_train_ppo.ipynb", root / "out2.ipynb", root, config_path=str(config), run_name="nb",
                     device="cpu")
    assert _images(nb2) >= 1
    text = _stream_text(nb2)
    assert "train nb: 1.60k/1.60k step (100%)" in text and "\r" not in text
    run_nb = root / "runs" / "nb"
    assert (run_nb / "dashboard.png").is_file() and (run_nb / "sample_rollout.png").is_file()
    # the same config through the training entry point gives the same curve
    py = train({**load_config(config), "run_name": "py"})
    a = np.load(run_nb / "checkpoints" / "training_stats.npz")
    b = np.load(py.run_dir / "checkpoints" / "training_stats.npz")
    keys = [k for k in a.files if not k.startswith(TIMING_STATS)]
    assert set(a.files) == set(b.files) and len(keys) > 10
    for k in keys:
        assert np.array_equal(a[k], b[k]), k

    nb3 = _papermill("03_evaluate.ipynb", root / "out3.ipynb", root,
                     model_path=str(run_nb / "checkpoints" / "final_model.pt"), data_path="data", num_segs=4,
                     export_dir=str(root / "export"))
    assert _images(nb3) >= 2
    assert (root / "export" / "controllers" / "ppo_policy.py").is_file()
    text = json.dumps(nb3)
    assert "reproduces the batched evaluation exactly: True" in text


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_dashboard_live_in_jupyterlab(nb_env, tmp_path):
    from tests.test_report_browser import LAUNCH_ARGS, chromium_or_fail

    exe = chromium_or_fail()
    root, config = nb_env
    import papermill as pm

    # the notebook with tiny parameters filled in, not executed
    pm.execute_notebook(str(PROJECT_ROOT / "notebooks" / "02_train_ppo.ipynb"), str(root / "live.ipynb"),
                        parameters={"config_path": str(config), "run_name": "live", "device": "cpu",
                                    "total_timesteps": 16000},
                        prepare_only=True, progress_bar=False)
    port, token = _free_port(), "testtoken"
    log = open(tmp_path / "jupyterlab.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
         f"--ServerApp.token={token}", "--allow-root", f"--ServerApp.root_dir={root}",
         "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        stdout=log, stderr=subprocess.STDOUT, cwd=root, env={**os.environ, "MPLBACKEND": "module://matplotlib_inline.backend_inline"})
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except Exception:
                time.sleep(0.5)
        else:
            pytest.fail(f"JupyterLab did not start; log: {(tmp_path / 'jupyterlab.log').read_text()[-2000:]}")
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=exe, headless=True, args=LAUNCH_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{base}/lab/tree/live.ipynb?token={token}")
            page.wait_for_selector(".jp-Notebook", timeout=60_000)
            page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle'], .jp-KernelStatus", timeout=60_000)
            time.sleep(2)
            page.locator("#jp-MainMenu").get_by_text("Run", exact=True).click()
            page.get_by_text("Run All Cells", exact=True).click()
            # the dashboard's figure, drawn inside the widget while the training cell runs
            img = page.locator(".jupyter-widgets .jp-OutputArea-output img").first
            img.wait_for(state="visible", timeout=180_000)
            shot = tmp_path / "dashboard_live.png"
            page.screenshot(path=str(shot), full_page=True)
            # the stop button ends the run between updates (clicks are handled while the cell runs)
            page.get_by_role("button", name="Stop after this update").click()
            page.get_by_text("done: stopped by user").wait_for(timeout=120_000)
            # static result figures appear below the dashboard
            page.wait_for_function(
                "document.querySelectorAll('.jp-OutputArea-output img').length >= 3", timeout=180_000)
            browser.close()
        assert shot.stat().st_size > 20_000
        final = load_checkpoint(root / "runs" / "live" / "checkpoints" / "final_model.pt")
        assert final["global_step"] < 16000  # stopped before the configured length
    finally:
        server.terminate()
        server.wait(timeout=20)
        log.close()
