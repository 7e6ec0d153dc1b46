"""Sweeps and seed studies at toy scale: Optuna on SQLite and a real PostgreSQL, heartbeats, dashboard, notebook.

Every run trains on training-region segments (05000.csv ...) only: 4 envs, 2 updates, 2 validation
segments, one behaviour-cloning epoch.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
import optuna
import pytest
import yaml
from optuna.trial import TrialState

from ppo_training import PROJECT_ROOT
from ppo_training.training import load_config
from ppo_training.tune import SearchSpace, SpaceError, SweepSettings, apply_params, run_sweep
from ppo_training.tune.__main__ import main
from ppo_training.tune.seeds import bootstrap_ci, bootstrap_diff_ci, compare, summarize
from tests.conftest import _asset_roots

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)
PG_CTL = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
SPACE = {"params": {
    "ppo.learning_rate": {"type": "log-float", "low": 1.0e-5, "high": 1.0e-3},
    "ppo.clip_coef": {"type": "float", "low": 0.1, "high": 0.3},
    "policy.hidden": {"type": "categorical", "choices": ["16,16", "32"]},
}}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _training_files() -> list[Path]:
    for root in _asset_roots():
        files = sorted((root / "data").glob("05*.csv"))
        if len(files) >= 6:
            return files[:6]
    pytest.fail("training-region segments data/05000.csv ... were not found; fetch the assets")


@pytest.fixture(scope="module")
def toy(tmp_path_factory, model_path):
    """A folder with data/ (six training-region segments), tiny.yaml and space.yaml; absolute paths only."""
    root = tmp_path_factory.mktemp("tune")
    (root / "data").mkdir()
    for f in _training_files():
        shutil.copy(f, root / "data" / f.name)
    cfg = load_config(None, {
        "data.path": str(root / "data"), "data.reserve_official": False, "data.val_fraction": 0.34,
        "data.test_fraction": 0.0, "data.val_segments": 2, "env.n_envs": 4, "train.total_timesteps": 3200,
        "train.eval_every": 1, "train.checkpoint_every": 100, "train.patience": None, "bc.episodes": 1,
        "bc.epochs": 1, "logging.progress": False, "device": "cpu", "runs_dir": str(root / "runs"),
        "tinyphysics_model": str(model_path),
    })
    (root / "tiny.yaml").write_text(yaml.safe_dump(cfg))
    (root / "space.yaml").write_text(yaml.safe_dump(SPACE))
    return root


def _sweep_args(toy: Path, study: str, storage: str, n: int, *extra: str) -> list[str]:
    return ["--config", str(toy / "tiny.yaml"), "--space", str(toy / "space.yaml"), "--n-trials", str(n),
            "--storage", storage, "--study", study, *extra]


def _trials(storage: str, study: str):
    return optuna.load_study(study_name=study, storage=storage).get_trials(deepcopy=False)


@pytest.fixture(scope="module")
def sqlite_study(toy):
    """A 3-trial study on SQLite, made by the command line in this process."""
    storage = f"sqlite:///{toy / 'runs' / 'tune.db'}"
    assert main(_sweep_args(toy, "toy", storage, 3, "--seed", "0")) == 0
    return storage, "toy"


@pytest.fixture(scope="module")
def seed_study(toy):
    assert main(["seeds", "--config", str(toy / "tiny.yaml"), "--seeds", "2", "--name", "toy_seeds"]) == 0
    return toy / "runs" / "toy_seeds"


# -- search-space files ------------------------------------------------------------------------------
def test_project_space_file_is_valid_against_config_yaml():
    space = SearchSpace.load(PROJECT_ROOT / "sweeps" / "ppo.yaml", load_config(None), "config.yaml")
    kinds = {p.key: p.kind for p in space.params}
    assert kinds["ppo.learning_rate"] == "float" and space.params[0].log
    assert kinds["env.n_envs"] == "categorical" and kinds["ppo.update_epochs"] == "int"
    hidden = next(p for p in space.params if p.key == "policy.hidden")
    cfg = apply_params(load_config(None), {"policy.hidden": hidden.choices[-1], "env.n_envs": 32})
    assert cfg["policy"]["hidden"] == [256, 256] and cfg["env"]["n_envs"] == 32


@pytest.mark.parametrize("params, message", [
    ({"ppo.learnin_rate": {"type": "float", "low": 0.1, "high": 0.2}}, "ppo.learnin_rate: unknown config key"),
    ({"ppo": {"type": "float", "low": 0.1, "high": 0.2}}, "ppo: is a section"),
    ({"ppo.gamma": {"type": "gaussian", "low": 0.1, "high": 0.2}}, "ppo.gamma: unknown type 'gaussian'"),
    ({"ppo.gamma": {"type": "float", "low": 0.9, "high": 0.9}}, "ppo.gamma: low (0.9) must be less than high"),
    ({"ppo.gamma": {"type": "float", "low": "a", "high": 0.9}}, "ppo.gamma: 'low' must be a finite number"),
    ({"ppo.gamma": {"type": "float", "low": 0.8, "hihg": 0.9}}, "unknown field(s) ['hihg']"),
    ({"ppo.learning_rate": {"type": "log-float", "low": 0.0, "high": 0.1}}, "a log scale needs low > 0"),
    ({"env.n_envs": {"type": "float", "low": 2, "high": 8}}, "env.n_envs: config.yaml has the integer 64; use type int"),
    ({"ppo.update_epochs": {"type": "int", "low": 1.5, "high": 8}}, "'low' must be an integer"),
    ({"env.kind": {"type": "int", "low": 1, "high": 8}}, "env.kind: type int needs a numeric setting"),
    ({"policy.hidden": {"type": "categorical", "choices": [64, 128]}}, "each choice must be a list or a comma"),
    ({"env.n_envs": {"type": "categorical", "choices": []}}, "non-empty list 'choices'"),
    ({"env.n_envs": {"type": "categorical", "choices": [32, 32]}}, "duplicate choices"),
])
def test_space_file_errors_name_the_file_and_key(tmp_path, params, message):
    path = tmp_path / "bad_space.yaml"
    path.write_text(yaml.safe_dump({"params": params}))
    with pytest.raises(SpaceError) as err:
        SearchSpace.load(path, load_config(None), "config.yaml")
    assert str(path) in str(err.value) and message in str(err.value)


def test_bad_space_and_set_are_reported_by_the_command(tmp_path, capsys):
    path = tmp_path / "space.yaml"
    path.write_text("params:\n  ppo.gama: {type: float, low: 0.8, high: 0.9}\n")
    assert main(["--space", str(path), "--n-trials", "1", "--storage", f"sqlite:///{tmp_path}/t.db"]) == 1
    assert f"{path}: ppo.gama: unknown config key" in capsys.readouterr().err
    assert main(["--space", str(PROJECT_ROOT / "sweeps" / "ppo.yaml"), "--n-trials", "1", "--set", "ppo.nope=1",
                 "--storage", f"sqlite:///{tmp_path}/t.db"]) == 1
    assert "--set: unknown config key 'ppo.nope'" in capsys.readouterr().err
    assert not (tmp_path / "t.db").exists()  # nothing was created


# -- sweeps ------------------------------------------------------------------------------------------
def test_sqlite_sweep_records_trials_and_rerun_continues_the_study(toy, sqlite_study, capsys):
    storage, name = sqlite_study
    trials = _trials(storage, name)
    assert len(trials) == 3 and all(t.state == TrialState.COMPLETE for t in trials)
    study = optuna.load_study(study_name=name, storage=storage)
    assert math.isfinite(study.best_value)
    for t in trials:
        a = t.user_attrs
        run_dir = toy / "runs" / name / str(t.number)
        assert a["run_dir"] == str(run_dir) and a["stopped_reason"] == "done" and a["final_global_step"] == 3200
        assert a["best_checkpoint"] == str(run_dir / "checkpoints" / "best.pt") and Path(a["best_checkpoint"]).is_file()
        # the starting (cloned) policy's validation, then one per eval_every updates
        assert [s for s, _ in a["val_curve"]] == [0, 1600, 3200] and t.value == min(c for _, c in a["val_curve"])
        assert sorted(t.intermediate_values) == [0, 1600, 3200]  # reported to the pruner
        assert list(run_dir.glob("events.out.tfevents.*"))  # TensorBoard
        saved = yaml.safe_load((run_dir / "config.yaml").read_text())
        assert saved["policy"]["hidden"] in ([16, 16], [32]) and saved["ppo"]["clip_coef"] == t.params["ppo.clip_coef"]
    assert study.user_attrs["space"]["params"]["policy.hidden"]["choices"] == ["16,16", "32"]
    # the same command again: the study already has its 3 trials
    assert main(_sweep_args(toy, name, storage, 3)) == 0
    out = capsys.readouterr().out
    assert "already has 3 finished trials" in out and f"eval.py --model_path {study.best_trial.user_attrs['best_checkpoint']}" in out
    assert len(_trials(storage, name)) == 3


def test_pruner_stops_the_training_run_and_marks_the_trial(toy, tmp_path):
    cfg = load_config(toy / "tiny.yaml")
    cfg["runs_dir"] = str(tmp_path / "runs")
    space = SearchSpace.from_dict(SPACE, cfg)
    settings = SweepSettings(study_name="prune", n_trials=1, storage=f"sqlite:///{tmp_path}/p.db")
    # every cost is above 0: pruned at the first report past the warm-up (the starting policy's is step 0)
    pruner = optuna.pruners.ThresholdPruner(upper=0.0, n_warmup_steps=1)
    study = run_sweep(cfg, space, settings, pruner=pruner, log=lambda s: None)
    (t,) = study.get_trials()
    assert t.state == TrialState.PRUNED and t.user_attrs["stopped_reason"] == "pruned"
    assert t.user_attrs["final_global_step"] == 1600 < 3200  # stopped after the first PPO validation
    assert [s for s, _ in t.user_attrs["val_curve"]] == [0, 1600] and (tmp_path / "runs" / "prune" / "0" / "checkpoints" / "best.pt").is_file()


def test_run_stopped_between_validations_is_scored_on_its_final_model(toy, tmp_path):
    from ppo_training.tune.runner import train_and_score, validate_checkpoint

    cfg = load_config(toy / "tiny.yaml")
    cfg.update(runs_dir=str(tmp_path / "runs"), run_name="short")
    # no validation of the starting policy, and the budget ends the run long before update 100's
    cfg["train"].update(eval_every=100, time_budget_s=1e-3, validate_at_start=False)
    out = train_and_score(cfg)
    assert out.result.stopped_because == "time budget" and 0 < out.result.global_step < 3200
    assert math.isfinite(out.value) and out.curve == [(out.result.global_step, out.value)]
    # the value is the final model's validation cost, recomputed here from the saved checkpoint
    assert out.value == validate_checkpoint(out.result.final_model, cfg["tinyphysics_model"])


# -- PostgreSQL: two workers, one study -----------------------------------------------------------------
@pytest.fixture()
def postgres_url(tmp_path):
    """A throw-away PostgreSQL server on a free local port; its URL.  Runs as `postgres` when we are root."""
    if not PG_CTL:
        pytest.skip("PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin "
                    "(apt-get install postgresql; .ci/run installs it)")
    bindir = PG_CTL[-1].parent
    if os.geteuid() == 0:  # the server refuses root; tmp_path's parents are private to root
        data = Path(tempfile.mkdtemp(prefix="tune-pg-"))
        shutil.chown(data, "postgres", "postgres")
        as_pg = ["runuser", "-u", "postgres", "--"]
    else:
        data, as_pg = tmp_path / "pg", []
    port = _free_port()
    try:
        subprocess.run([*as_pg, str(bindir / "initdb"), "-D", str(data / "db"), "-U", "tune", "--auth=trust",
                        "--no-locale", "-E", "UTF8", "--no-sync"], check=True, capture_output=True)
        subprocess.run([*as_pg, str(bindir / "pg_ctl"), "-D", str(data / "db"), "-l", str(data / "server.log"), "-w",
                        "-o", f"-p {port} -k {data} -c listen_addresses=127.0.0.1 -c fsync=off", "start"],
                       check=True, capture_output=True, timeout=60)
        try:
            subprocess.run([str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "tune", "optuna"],
                           check=True, capture_output=True, timeout=30)
            yield f"postgresql+psycopg2://tune@127.0.0.1:{port}/optuna"
        finally:
            subprocess.run([*as_pg, str(bindir / "pg_ctl"), "-D", str(data / "db"), "-m", "immediate", "stop"],
                           capture_output=True, timeout=60)
    finally:
        if os.geteuid() == 0:
            shutil.rmtree(data, ignore_errors=True)


def _worker(args: list[str], log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    return subprocess.Popen([sys.executable, "-m", "ppo_training.tune", *args], stdout=log.open("w"),
                            stderr=subprocess.STDOUT, env=env)


def test_two_workers_share_one_postgres_study(toy, postgres_url, tmp_path):
    n = 4
    procs = [_worker(_sweep_args(toy, "pg", postgres_url, n, "--seed", str(k), "--set", "train.total_timesteps=1600"),
                     tmp_path / f"worker{k}.log")
             for k in range(2)]
    for k, p in enumerate(procs):
        assert p.wait(timeout=240) == 0, (tmp_path / f"worker{k}.log").read_text()[-3000:]
    trials = _trials(postgres_url, "pg")
    finished = [t for t in trials if t.state in FINISHED]
    assert len(finished) == n
    # each finished trial once: its own number and run folder, trained to the end
    assert len({t.number for t in finished}) == n
    assert len({t.user_attrs["run_dir"] for t in finished}) == n
    assert all(Path(t.user_attrs["best_checkpoint"]).is_file() for t in finished)
    # both workers ran trials; a trial that lost the race for the last slot trained nothing
    assert len({t.user_attrs["pid"] for t in finished}) == 2
    assert all(t.user_attrs.get("stopped_reason") == "surplus" for t in trials if t.state == TrialState.FAIL)
    assert not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    logs = "".join((tmp_path / f"worker{k}.log").read_text() for k in range(2))
    assert logs.count(f"/{n}] trial ") == n  # one progress line per finished trial


# -- a killed worker ---------------------------------------------------------------------------------
def test_killed_worker_loses_only_its_trial(toy, tmp_path, capsys):
    storage, name = f"sqlite:///{tmp_path / 'kill.db'}", "kill"
    beat = ["--heartbeat-interval", "1", "--grace-period", "3"]
    victim = _worker(_sweep_args(toy, name, storage, 2, *beat, "--set", "train.total_timesteps=64000"),
                     tmp_path / "victim.log")
    started = toy / "runs" / name / "0" / "config.yaml"
    deadline = time.time() + 120
    while not started.exists():
        assert victim.poll() is None and time.time() < deadline, (tmp_path / "victim.log").read_text()[-3000:]
        time.sleep(0.2)
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=30)
    (stale,) = _trials(storage, name)
    assert stale.state == TrialState.RUNNING  # the dead worker's trial is left running

    assert main(_sweep_args(toy, name, storage, 2, *beat, "--set", "train.total_timesteps=1600")) == 0
    trials = {t.number: t for t in _trials(storage, name)}
    assert trials[0].state == TrialState.FAIL  # failed by the heartbeat check of the new worker
    finished = [t for t in trials.values() if t.state in FINISHED]
    assert len(finished) == 2
    retry = [t for t in finished if t.user_attrs.get("retry_of") == 0]
    assert len(retry) == 1 and retry[0].params == trials[0].params  # retried with the same parameters
    assert "2/2] trial" in capsys.readouterr().out


# -- optuna-dashboard ------------------------------------------------------------------------------
def test_optuna_dashboard_renders_the_study_in_chromium(sqlite_study, tmp_path):
    from tests.test_report_browser import LAUNCH_ARGS, chromium_or_fail

    exe = chromium_or_fail()
    storage, name = sqlite_study
    port = _free_port()
    dashboard = Path(sys.executable).parent / "optuna-dashboard"
    log = (tmp_path / "dashboard.log").open("w")
    server = subprocess.Popen([str(dashboard), storage, "--host", "127.0.0.1", "--port", str(port)],
                              stdout=log, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(120):
            try:
                studies = json.loads(urllib.request.urlopen(f"{base}/api/studies", timeout=2).read())
                break
            except Exception:
                assert server.poll() is None, (tmp_path / "dashboard.log").read_text()[-2000:]
                time.sleep(0.5)
        else:
            pytest.fail(f"optuna-dashboard did not start: {(tmp_path / 'dashboard.log').read_text()[-2000:]}")
        assert [s["study_name"] for s in studies["study_summaries"]] == [name]
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=exe, headless=True, args=LAUNCH_ARGS)
            page = browser.new_page(viewport={"width": 1300, "height": 900})
            page.goto(f"{base}/dashboard/")
            page.wait_for_function(f"document.body.innerText.includes({json.dumps(name)})", timeout=60_000)
            page.screenshot(path=str(tmp_path / "dashboard_studies.png"), full_page=True)
            page.get_by_text(name).first.click()  # the study's page: history, importances, best trial
            best = optuna.load_study(study_name=name, storage=storage).best_trial.number
            page.get_by_text(f"Best Trial (number={best})").wait_for(timeout=60_000)
            page.screenshot(path=str(tmp_path / "dashboard_study.png"), full_page=True)
            browser.close()
        assert (tmp_path / "dashboard_study.png").stat().st_size > 20_000
    finally:
        server.terminate()
        server.wait(timeout=20)
        log.close()


# -- seeds ----------------------------------------------------------------------------------------
def test_bootstrap_statistics():
    assert bootstrap_ci([3.0, 3.0, 3.0]) == (3.0, 3.0)
    lo, hi = bootstrap_ci(np.arange(20.0))
    assert lo < 9.5 < hi and hi - lo < 10
    s = summarize([1.0, 2.0, 3.0])
    assert s["n"] == 3 and s["mean"] == 2.0 and s["std"] == 1.0 and s["ci95"][0] <= 2.0 <= s["ci95"][1]
    assert summarize([5.0])["std"] is None
    lo, hi = bootstrap_diff_ci([1.0, 1.1, 0.9], [3.0, 3.1, 2.9])
    assert 1.5 < lo <= hi < 2.5
    c = compare({"name": "a", "seeds": [{"best_val_cost": v} for v in (1.0, 1.1)]},
                {"name": "b", "seeds": [{"best_val_cost": v} for v in (3.0, 3.1)]})
    assert c["diff"] == pytest.approx(2.0) and c["verdict"].startswith("a is lower")


def test_seeds_mode_reports_mean_std_ci_and_writes_json_and_png(toy, seed_study, sqlite_study, capsys):
    summary = json.loads((seed_study / "seeds.json").read_text())
    values = [s["best_val_cost"] for s in summary["seeds"]]
    assert [s["seed"] for s in summary["seeds"]] == [0, 1] and all(math.isfinite(v) for v in values)
    assert summary["n"] == 2 and summary["mean"] == pytest.approx(np.mean(values))
    assert summary["std"] == pytest.approx(np.std(values, ddof=1))
    assert summary["ci95"][0] <= summary["mean"] <= summary["ci95"][1]
    assert all([p[0] for p in s["curve"]] == [0, 1600, 3200] and Path(s["best_checkpoint"]).is_file() for s in summary["seeds"])
    refs = summary["references"]
    assert refs["n_files"] == 2 and refs["teacher"] > 0 and refs["pid"] > 0
    assert (seed_study / "seeds.png").stat().st_size > 10_000
    # the best trial of the study over one seed, then both seed studies compared
    storage, name = sqlite_study
    assert main(["seeds", "--config", str(toy / "tiny.yaml"), "--seeds", "1", "--name", "best", "--from-study", name,
                 "--storage", storage, "--no-references"]) == 0
    best = json.loads((toy / "runs" / "best" / "seeds.json").read_text())
    assert best["params"] == optuna.load_study(study_name=name, storage=storage).best_params
    capsys.readouterr()
    assert main(["compare", str(seed_study), str(toy / "runs" / "best")]) == 0
    table = capsys.readouterr().out
    assert "toy_seeds" in table and "best - toy_seeds" in table and "95% CI" in table and "references:" in table


# -- figures -----------------------------------------------------------------------------------------
def test_study_figures_handle_too_few_trials():
    import matplotlib

    matplotlib.use("Agg")
    from ppo_training.tune.figures import history_figure, importance_figure, param_importances, trial_curves_figure

    study = optuna.create_study(direction="minimize")
    dist = {"ppo.gamma": optuna.distributions.FloatDistribution(0.8, 0.99)}
    assert param_importances(study)[1].endswith("the study has 0")
    study.add_trial(optuna.trial.create_trial(params={"ppo.gamma": 0.9}, distributions=dist, value=40.0,
                                              user_attrs={"val_curve": [[800, 45.0], [1600, 40.0]]}))
    study.add_trial(optuna.trial.create_trial(params={"ppo.gamma": 0.8}, distributions=dist, state=TrialState.PRUNED,
                                              intermediate_values={800: 60.0}, user_attrs={"val_curve": [[800, 60.0]]}))
    importances, reason = param_importances(study)
    assert importances == {} and "at least 2 complete trials; the study has 1" in reason
    for make in (history_figure, importance_figure, trial_curves_figure):
        fig = make(study)
        assert fig.axes, make.__name__
    assert "at least 2 complete trials" in importance_figure(study).axes[0].texts[0].get_text()
    study.add_trial(optuna.trial.create_trial(params={"ppo.gamma": 0.95}, distributions=dist, value=30.0))
    importances, reason = param_importances(study)
    assert reason is None and set(importances) == {"ppo.gamma"}


# -- notebook 04 -----------------------------------------------------------------------------------
def test_notebook_04_runs_under_papermill(toy, sqlite_study, seed_study, monkeypatch):
    import papermill as pm

    monkeypatch.setenv("PYTHONPATH", str(PROJECT_ROOT))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    storage, name = sqlite_study
    out = toy / "out4.ipynb"
    pm.execute_notebook(str(PROJECT_ROOT / "notebooks" / "04_sweeps.ipynb"), str(out), cwd=str(toy),
                        parameters={"storage": storage, "study_name": name, "seed_runs": [str(seed_study)]},
                        kernel_name="python3", progress_bar=False)
    nb = json.loads(out.read_text())
    images = sum("image/png" in o.get("data", {}) for c in nb["cells"] if c["cell_type"] == "code" for o in c["outputs"])
    assert images >= 4  # history, importances, trials' curves, seeds' curves
    text = json.dumps(nb)
    assert "eval.py --model_path" in text and "toy_seeds: 2 seeds" in text
