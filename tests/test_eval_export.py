"""eval.py with a trained policy, the HTML report, and export to the official harness."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ppo_training import PROJECT_ROOT
from ppo_training.cli import evaluate as eval_cli
from ppo_training.controllers import OfficialControllerAdapter
from ppo_training.controllers.policy import PolicyController
from ppo_training.data import list_segment_files
from ppo_training.evaluation import evaluate
from ppo_training.export import export_policy
from ppo_training.training import load_config, train

REFERENCE = PROJECT_ROOT / "models" / "reference" / "ppo_reference.pt"


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory, model_path, real_files_src):
    """A policy trained for two tiny updates on two real segments (training files recorded)."""
    root = tmp_path_factory.mktemp("tiny_run")
    data = root / "train_data"
    data.mkdir()
    for f in real_files_src[:2]:
        (data / f.name).write_bytes(f.read_bytes())
    cfg = load_config(None, {
        "data.path": str(data), "data.reserve_official": False, "data.val_fraction": 0.0, "data.test_fraction": 0.0,
        "data.val_segments": 1, "env.n_envs": 2, "train.total_timesteps": 1600, "train.eval_every": 1,
        "train.checkpoint_every": 1, "bc.episodes": 1, "bc.epochs": 2, "logging.progress": False,
        "logging.tensorboard": False, "device": "cpu", "runs_dir": str(root / "runs"), "run_name": "tiny",
        "tinyphysics_model": str(model_path),
    })
    return train(cfg).final_model


def test_eval_with_model_writes_table_csv_report(in_data_dir, tiny_checkpoint, capsys):
    out, report = in_data_dir / "res.csv", in_data_dir / "report.html"
    rc = eval_cli.main(["--model_path", str(tiny_checkpoint), "--data_path", "data", "--num_segs", "8",
                        "--output", str(out), "--report", str(report), "--no_progress"])
    assert rc == 0
    text = capsys.readouterr()
    assert "ratio" in text.out and "pid" in text.out
    table = pd.read_csv(out)
    assert list(table.columns) == ["segment", "lataccel_cost", "jerk_cost", "total_cost",
                                   "baseline_lataccel_cost", "baseline_jerk_cost", "baseline_total_cost"]
    assert table["segment"].tolist() == [f"data/0000{k}.csv" for k in range(8)]
    pid = evaluate(eval_cli.make_controller("pid"), table["segment"].tolist(),
                   backend=eval_cli.make_backend("onnx"), progress=False).table
    assert np.array_equal(table["baseline_total_cost"].to_numpy(), pid["total_cost"].to_numpy())
    html = report.read_text()
    assert html.count("<img") >= 4 and "data:image/png;base64," in html and "<table>" in html
    # the two training segments were evaluated too: loud warning with the count
    assert "2 of 8 evaluated segments were in this policy's training files" in text.err


@pytest.mark.parametrize("bad", ["missing", "garbage", "foreign"])
def test_eval_rejects_bad_model_path_without_partial_report(in_data_dir, bad, capsys):
    import torch

    path = in_data_dir / f"{bad}.pt"
    if bad == "garbage":
        path.write_bytes(b"\x00not a checkpoint")
    elif bad == "foreign":
        torch.save({"state_dict": {}}, path)
    report = in_data_dir / "r.html"
    rc = eval_cli.main(["--model_path", str(path), "--data_path", "data", "--report", str(report), "--no_progress"])
    assert rc == 1
    err = capsys.readouterr().err
    assert "error:" in err and path.name in err
    assert not report.exists() and not list(in_data_dir.glob(".r.html*"))


def test_eval_rejects_empty_data_folder(in_data_dir, tiny_checkpoint, capsys):
    (in_data_dir / "empty").mkdir()
    rc = eval_cli.main(["--model_path", str(tiny_checkpoint), "--data_path", "empty", "--no_progress"])
    assert rc == 1 and "no .csv segment files" in capsys.readouterr().err


def _load_exported(py: Path):
    return OfficialControllerAdapter.from_path(py)


def test_export_matches_batched_policy_eval(in_data_dir, tiny_checkpoint, onnx_backend, tmp_path, model_path,
                                            monkeypatch):
    monkeypatch.setenv("TINYPHYSICS_MODEL", str(model_path))  # the policy uses the model prediction
    py = export_policy(tiny_checkpoint, tmp_path / "out", name="ppo_policy")
    assert py.is_file() and py.with_suffix(".npz").is_file()
    src = py.read_text()
    import ast

    def imported(nodes):
        names = set()
        for node in nodes:
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                names.add(node.module or ".")
        return names

    tree = ast.parse(src)
    # At module level numpy and the standard library only; onnxruntime (the official harness's own
    # dependency) is imported inside the predictor, for policies that use the model prediction.
    assert imported(tree.body) <= {"__future__", "os", "numpy", "."}, imported(tree.body)
    assert imported(ast.walk(tree)) <= {"__future__", "os", "numpy", ".", "onnxruntime"}, imported(ast.walk(tree))
    files = list_segment_files("data")
    exported = evaluate(_load_exported(py), files, backend=onnx_backend, progress=False).table
    batched = evaluate(PolicyController.from_checkpoint(tiny_checkpoint), files, backend=onnx_backend,
                       progress=False).table
    assert exported["segment"].tolist() == batched["segment"].tolist()
    assert np.array_equal(exported["total_cost"].to_numpy(), batched["total_cost"].to_numpy())


def test_exported_controller_leaves_global_rng_alone(tiny_checkpoint, tmp_path):
    py = export_policy(tiny_checkpoint, tmp_path / "out2", name="pol")
    spec = importlib.util.spec_from_file_location("pol_standalone", py)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # outside a controllers package: BaseController falls back to object
    from collections import namedtuple

    State = namedtuple("State", ["roll_lataccel", "v_ego", "a_ego"])
    Plan = namedtuple("Plan", ["lataccel", "roll_lataccel", "v_ego", "a_ego"])
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    ctrl = mod.Controller()
    for k in range(120):
        n = max(0, 49 - max(0, k - 100))
        out = ctrl.update(0.1, 0.05, State(0.01, 20.0, 0.0), Plan([0.1] * n, [0.0] * n, [20.0] * n, [0.0] * n))
        assert isinstance(out, float) and np.isfinite(out)
    assert np.array_equal(np.random.get_state()[1], before)


def test_export_cli_errors(tmp_path):
    r = subprocess.run([sys.executable, "-m", "ppo_training.export", "--model_path", str(tmp_path / "nope.pt"),
                        "--out", str(tmp_path / "o")], capture_output=True, text=True, cwd=PROJECT_ROOT)
    assert r.returncode == 1 and "nope.pt" in r.stderr


def test_reference_policy_is_committed_and_evaluates(in_data_dir, onnx_backend):
    assert REFERENCE.is_file(), "models/reference/ppo_reference.pt is part of the repository"
    ctrl = PolicyController.from_checkpoint(REFERENCE)
    res = evaluate(ctrl, list_segment_files("data"), backend=onnx_backend, progress=False)
    assert np.isfinite(res.table["total_cost"]).all()
