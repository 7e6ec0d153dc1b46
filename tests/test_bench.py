"""The learning and quality benchmarks at tiny scale: they run, compare configurations side by side,
and write what they promise (table, JSON, plot; the reference's provenance)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ppo_training import PROJECT_ROOT
from ppo_training.training import load_config


@pytest.fixture()
def tiny_config(tmp_path, model_path) -> Path:
    """Four envs, two validation files, one cloning epoch: seconds per configuration."""
    cfg = load_config(None, {
        "env.n_envs": 4, "data.val_segments": 2, "bc.episodes": 1, "bc.epochs": 1, "train.eval_every": 1,
        "tinyphysics_model": str(model_path), "data.path": str(PROJECT_ROOT / "data"),
    })
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_ppo_learning_bench_runs_an_ablation_side_by_side(tiny_config, tmp_path):
    name = f"test_{tmp_path.name}"
    out = PROJECT_ROOT / "runs" / "ppo_learning" / name
    try:
        r = subprocess.run([sys.executable, str(PROJECT_ROOT / "bench" / "ppo_learning.py"), "--budget-min", "0.05",
                            "--config", str(tiny_config), "--name", name, "--set", "ppo.exploration=ar1 ppo.noise_rho=0.8"],
                           capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=600)
        assert r.returncode == 0, r.stdout + r.stderr
        table = r.stdout
        assert "teacher (PID + feedforward)" in table and "ppo.exploration=ar1 ppo.noise_rho=0.8" in table
        assert "steps/s" in table and "peak MB" in table
        res = json.loads((out / "results.json").read_text())
        assert [x["label"] for x in res["results"]] == ["default", "ppo.exploration=ar1 ppo.noise_rho=0.8"]
        refs = res["references"]
        assert refs["teacher"] > 0 and refs["pid"] > 0
        for x in res["results"]:
            assert x["ok"] and x["global_step"] >= 1600 and x["env_steps_per_s"] > 0 and x["peak_rss_mb"] > 0
            # the curve starts at the cloned policy and ends at the final one
            assert len(x["val_cost"]) >= 2 and x["val_step"][0] == 0 and len(x["val_wall_s"]) == len(x["val_cost"])
        assert (out / "curves.png").stat().st_size > 10_000
    finally:
        shutil.rmtree(out, ignore_errors=True)


def test_ppo_learning_bench_rejects_unknown_keys(tiny_config):
    r = subprocess.run([sys.executable, str(PROJECT_ROOT / "bench" / "ppo_learning.py"), "--budget-min", "1",
                        "--config", str(tiny_config), "--set", "ppo.learnin_rate=0.1"],
                       capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=120)
    assert r.returncode == 1 and "ppo.learnin_rate" in r.stderr


def test_quality_bench_scores_a_checkpoint_and_records_how_it_was_made(tiny_config, tmp_path):
    from ppo_training.training import train

    cfg = load_config(tiny_config, {"runs_dir": str(tmp_path / "runs"), "run_name": "q", "train.total_timesteps": 1600,
                                    "logging.progress": False, "train.copy_final_model": False})
    ckpt = train(cfg).final_model
    r = subprocess.run([sys.executable, str(PROJECT_ROOT / "bench" / "train_quality.py"), "--checkpoint", str(ckpt)],
                       capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    out = PROJECT_ROOT / "runs" / "q" / "quality.json"
    try:
        q = json.loads(out.read_text())
        assert q["segments"] == [f"data/{k:05d}.csv" for k in range(8)]
        assert set(q["rows"]) == {"pid", "teacher", "ppo"}
        # the teacher on the evaluation segments, as eval.py --controller teacher gives it
        assert q["rows"]["teacher"]["total_cost"] == pytest.approx(35.3725, abs=1e-3)
        assert q["ppo_over_teacher"] == pytest.approx(q["rows"]["ppo"]["total_cost"] / q["rows"]["teacher"]["total_cost"])
        assert q["train_files"] and not any(f < "05000.csv" for f in q["train_files"])
        assert q["validation_curve"]["step"][0] == 0 and q["config"]["env"]["n_envs"] == 4
    finally:
        shutil.rmtree(out.parent, ignore_errors=True)
