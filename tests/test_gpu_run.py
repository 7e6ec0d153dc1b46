"""The one-shot GPU run (bench/gpu_run.sh): every step at toy size on the CPU, and its bookkeeping."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ppo_training import PROJECT_ROOT

STEPS = ("info", "correctness", "throughput", "eval5k", "ppo", "profile", "train", "notebook")
TARGETS = ("sim_fp32_env_steps_per_s", "sim_bf16_env_steps_per_s", "eval_5000_wall_s", "ppo_transitions_per_s",
           "ppo_over_pid")


def _gpu_run():
    spec = importlib.util.spec_from_file_location("gpu_run", PROJECT_ROOT / "bench" / "gpu_run.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gpu_run"] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture()
def gpu_assets(tmp_path, model_path, real_files_src) -> Path:
    """Assets laid out as bench/prepare_gpu_assets.sh makes them, from the local asset copy."""
    src = Path(real_files_src[0]).parent.parent
    if not (src / "models" / "tinyphysics.onnx").is_file():  # model and data found in different roots
        src = tmp_path / "src"
        (src / "models").mkdir(parents=True)
        (src / "models" / "tinyphysics.onnx").symlink_to(model_path)
        (src / "data").symlink_to(Path(real_files_src[0]).parent)
    dest = tmp_path / "assets"
    r = subprocess.run(["bash", "bench/prepare_gpu_assets.sh", str(src), str(dest)], cwd=PROJECT_ROOT,
                       capture_output=True, text=True, env={**os.environ, "PYTHON": sys.executable}, timeout=120)
    if r.returncode != 0 and "some training files" in r.stdout + r.stderr:
        pytest.skip("the local asset copy holds no training segments besides the evaluation files")
    assert r.returncode == 0, r.stdout + r.stderr
    return dest


def test_gpu_run_quick_runs_every_step_on_the_cpu(tmp_path, gpu_assets):
    out = tmp_path / "out"
    r = subprocess.run(["bash", "bench/gpu_run.sh", "--quick", "--assets", str(gpu_assets), str(out)],
                       cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=900,
                       env={**os.environ, "PYTHON": sys.executable})
    log = (out / "gpu_run.log").read_text() if (out / "gpu_run.log").is_file() else r.stdout + r.stderr
    assert r.returncode == 0, log[-4000:]
    res = json.loads((out / "gpu_run.json").read_text())
    # every step ran and succeeded; the JSON holds each step's status and wall time
    assert list(res["steps"]) == list(STEPS)
    bad = {k: v for k, v in res["steps"].items() if v.get("status") != "ok"}
    assert not bad, (bad, log[-4000:])
    assert all(v["wall_s"] > 0 and v["limit_s"] > 0 for v in res["steps"].values())
    assert res["quick"] and res["card"] and res["torch"]
    # every target judged: value, threshold, met, by how much
    assert set(res["targets"]) == set(TARGETS)
    for key, t in res["targets"].items():
        assert t["value"] is not None and isinstance(t["met"], bool) and t["margin_pct"] is not None, (key, t)
    # figures of every step
    c = res["correctness"]
    assert c["checks"]["fp32_logits_rel_err_le_1e-5"] and c["fp32_max_abs_total_cost_diff"] == 0
    assert set(c["logits"]) == {"fp32", "tf32", "bf16"}
    tp = res["throughput"]
    assert set(tp["eager"]) == {"fp32", "tf32", "bf16"} and tp["compiled"]["fp32"] and tp["best"]["fp32"]
    assert res["eval5k"]["runs"]["fp32"]["wall_s"] > 0 and "tiled" in res["eval5k"]["data"]
    assert res["ppo"]["transitions_per_s"] > 0 and res["ppo"]["updates"] == 2
    prof = res["profile"]
    assert prof["ran"] and prof["env_step_host_reads"] == 0 and prof["env_step_host_arrays"] == 0
    assert "Self CPU" in log  # the profiler tables
    tr = res["train"]
    assert tr["ppo_over_pid"] > 0 and tr["files"]["train"] > 0 and tr["global_step"] > 0
    nb = res["notebook"]
    assert nb["errors"] == [] and nb["image_outputs"] >= 1 and "dashboard.png" in nb["figures"]
    # OUTDIR: at most 8 files, none in a sub-folder
    entries = list(out.iterdir())
    assert all(p.is_file() for p in entries), entries
    assert len(entries) <= 8, entries
    assert {p.name for p in entries} >= {"gpu_run.json", "gpu_run.log", "throughput.png", "ppo_gpu.pt",
                                          "train_ppo.ipynb", "dashboard.png"}
    # the summary table is printed
    assert "targets met" in r.stdout and "sim_fp32_env_steps_per_s" in r.stdout


def test_training_folder_never_holds_an_evaluation_file(tmp_path):
    gr = _gpu_run()
    data = tmp_path / "assets" / "data"
    data.mkdir(parents=True)
    for name in ("00000.csv", "00007.csv", "04999.csv", "05000.csv", "19999.csv", "synth_00001.csv"):
        (data / name).write_text("t\n")
    args = type("A", (), {"step_deadline": None})()
    ctx = gr.Ctx(args, tmp_path / "work", tmp_path / "out", tmp_path / "assets", "cpu", True)
    names = sorted(p.name for p in gr.training_dir(ctx).iterdir())
    assert names == ["05000.csv", "19999.csv", "synth_00001.csv"]


def test_targets_are_judged_with_their_margin():
    gr = _gpu_run()
    assert gr.judge(3.0e6, ">=", 2.0e6) == {"value": 3.0e6, "target": ">= 2e+06", "met": True, "margin_pct": 50.0,
                                            "missed_by": None}
    low = gr.judge(1.5e6, ">=", 2.0e6)
    assert not low["met"] and low["margin_pct"] == -25.0 and low["missed_by"] == 0.5e6
    slow = gr.judge(2.5, "<=", 2.0)
    assert not slow["met"] and slow["margin_pct"] == pytest.approx(-25.0) and slow["missed_by"] == 0.5
    assert gr.judge(None, "<=", 0.45)["met"] is False


def test_carried_wheels_are_checked_against_their_requirements(tmp_path, monkeypatch):
    gr = _gpu_run()
    # pytest and packaging are installed here; a carried name that is not is reported as missing
    res = gr.check_requirements([("pytest", __import__("pytest").__version__), ("no-such-package", "1.0")])
    assert res["installed"]["pytest"] and res["missing"] == ["no-such-package==1.0 (carried)"]
    assert res["conflicts"] == []
