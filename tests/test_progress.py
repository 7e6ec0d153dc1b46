"""Progress output: bars for terminals and notebooks, a few plain lines for logs, CI and papermill."""
from __future__ import annotations

import io

import pytest

from ppo_training.utils import progress as prog


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for var in (prog.MODE_ENV, prog.INTERVAL_ENV, "JPY_SESSION_NAME"):
        monkeypatch.delenv(var, raising=False)


def test_long_job_in_a_log_writes_a_few_plain_lines():
    log = io.StringIO()  # not a terminal: a log file, a pipe, CI
    assert isinstance(prog.progress(10, "x", stream=log), prog.LineProgress)
    clock = FakeClock()
    with prog.LineProgress(600_000, "train run", unit="step", unit_scale=True, interval_s=30, stream=log,
                           clock=clock) as bar:
        for k in range(6000):  # ten simulated minutes, 0.1 s per update
            clock.t += 0.1
            bar.update(100)
            bar.set_postfix(ep_cost=f"{k:.1f}")
    out = log.getvalue()
    assert "\r" not in out
    lines = out.splitlines()
    assert 19 <= len(lines) <= 21, lines  # one per 30 s, and the final one
    assert all(line.startswith("train run: ") for line in lines)
    assert "600k/600k step (100%)" in lines[-1] and "ep_cost=5999.0" in lines[-1]
    assert "eta" in lines[0] and "1.00k step/s" in lines[0]


def test_terminal_gets_a_tqdm_bar_and_off_prints_nothing(monkeypatch):
    from tqdm.std import tqdm

    tty = Terminal()
    bar = prog.progress(10, "x", stream=tty)
    assert isinstance(bar, tqdm)
    bar.update(10)
    bar.close()
    assert "\r" in tty.getvalue()  # a live bar redraws in place
    monkeypatch.setenv(prog.MODE_ENV, "off")
    log = io.StringIO()
    with prog.progress(10, "x", stream=log) as quiet:
        quiet.update(10)
    assert log.getvalue() == ""
    assert isinstance(prog.progress(10, disable=True), prog.SilentProgress)


def test_mode_rule(monkeypatch):
    assert prog.progress_mode(Terminal(), environ={}) == "bar"
    assert prog.progress_mode(io.StringIO(), environ={}) == "lines"
    assert prog.progress_mode(Terminal(), environ={prog.MODE_ENV: "lines"}) == "lines"
    with pytest.raises(ValueError, match="PPO_PROGRESS='loud'"):
        prog.progress_mode(io.StringIO(), environ={prog.MODE_ENV: "loud"})
    # In a Jupyter kernel: widgets for a notebook open in JupyterLab, lines under papermill.
    monkeypatch.setattr(prog, "_in_jupyter_kernel", lambda: True)
    assert prog.progress_mode(io.StringIO(), environ={"JPY_SESSION_NAME": "02_train_ppo.ipynb"}) == "bar"
    assert prog.progress_mode(io.StringIO(), environ={}) == "lines"


def test_interval_setting():
    assert prog.progress_interval(None, environ={}) == 30.0
    assert prog.progress_interval(5, environ={}) == 5.0
    assert prog.progress_interval(5, environ={prog.INTERVAL_ENV: "2.5"}) == 2.5
    with pytest.raises(ValueError, match="PPO_PROGRESS_INTERVAL='soon'"):
        prog.progress_interval(5, environ={prog.INTERVAL_ENV: "soon"})
    with pytest.raises(ValueError, match="positive"):
        prog.progress_interval(0, environ={})


def test_short_transient_job_stays_quiet_and_track_counts():
    log = io.StringIO()
    assert list(prog.track(range(3), desc="loading", leave=False, stream=log)) == [0, 1, 2]
    assert log.getvalue() == ""
    assert list(prog.track(range(3), desc="copying", stream=log)) == [0, 1, 2]
    assert log.getvalue().startswith("copying: 3/3 it (100%)") and log.getvalue().count("\n") == 1
