"""Optuna studies of training runs: storage, sampler, pruner, the objective, and a worker.

Any number of workers (processes, machines, or ``n_jobs`` threads of one process) run
:func:`run_sweep` against one study in one database.  Optuna does the scheduling:

* the **sampler** (TPE by default) proposes each trial's parameters from the finished trials;
* each trial is a normal training run in ``runs/<study>/<trial number>/``; every validation is
  reported with ``trial.report(cost, global_step)`` and the **pruner** (median by default) may
  end it early through the training loop's ``should_stop`` poll (the trial is then PRUNED);
* the objective is the run's best validation cost (minimised);
* the **storage** is an :class:`optuna.storages.RDBStorage` (SQLite file by default, any
  SQLAlchemy URL such as PostgreSQL for many machines) with a **heartbeat**: a trial whose worker
  died stops beating, the next worker marks it FAIL and
  :class:`~optuna.storages.RetryHeartbeatStaleTrialCallback` queues a retry with the same
  parameters, so a killed worker loses only its trial;
* ``n_trials`` is the study's total of finished (COMPLETE or PRUNED) trials:
  :class:`~optuna.study.MaxTrialsCallback` stops a worker once the study has them.  Workers also
  avoid starting trials that cannot count: before each trial a worker waits while the running
  trials of other workers would complete the study (one of them may still die and need a retry),
  and a trial that lost a race for the last slot ends at once as FAIL with the user attr
  ``stopped_reason: surplus`` (no training run).
"""
from __future__ import annotations

import os
import socket
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import optuna
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.study import MaxTrialsCallback
from optuna.trial import FrozenTrial, TrialState

from .runner import train_and_score
from .space import SearchSpace, apply_params

DEFAULT_STORAGE = "sqlite:///runs/tune.db"
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)
SAMPLERS = ("tpe", "random")
PRUNERS = ("median", "halving", "hyperband", "none")
Log = Callable[[str], None]


@dataclass
class SweepSettings:
    """How a worker runs its study (the CLI's options).

    Attributes:
        study_name: the study (created on first use, joined afterwards).
        n_trials: the study's total of finished (COMPLETE + PRUNED) trials to reach.
        storage: SQLAlchemy URL of the study database.
        n_jobs: trials this worker runs at once (threads).
        seed: the sampler's seed (give each worker its own, or none).
        sampler: ``tpe`` or ``random``.
        pruner: ``median``, ``halving`` (successive halving), ``hyperband`` or ``none``.
        pruner_startup_trials: the median pruner prunes nothing until this many trials finished.
        pruner_warmup_steps: nor before this many environment steps of a trial.
        heartbeat_interval: seconds between a running trial's heartbeats.
        grace_period: seconds without a heartbeat after which a RUNNING trial is stale (FAIL).
        max_retry: retries of a stale trial (same parameters, new trial number).
        max_failures: consecutive failed trials after which this worker gives up.
    """

    study_name: str
    n_trials: int
    storage: str = DEFAULT_STORAGE
    n_jobs: int = 1
    seed: int | None = None
    sampler: str = "tpe"
    pruner: str = "median"
    pruner_startup_trials: int = 5
    pruner_warmup_steps: int = 0
    heartbeat_interval: int = 60
    grace_period: int = 180
    max_retry: int = 2
    max_failures: int = 3

    def __post_init__(self) -> None:
        if self.n_trials < 1:
            raise ValueError(f"n_trials must be at least 1, got {self.n_trials}")
        if self.n_jobs < 1:
            raise ValueError(f"n_jobs must be at least 1, got {self.n_jobs}")
        if self.sampler not in SAMPLERS:
            raise ValueError(f"unknown sampler {self.sampler!r}; expected one of {', '.join(SAMPLERS)}")
        if self.pruner not in PRUNERS:
            raise ValueError(f"unknown pruner {self.pruner!r}; expected one of {', '.join(PRUNERS)}")
        if self.heartbeat_interval < 1 or self.grace_period <= self.heartbeat_interval:
            raise ValueError(f"need heartbeat_interval >= 1 and grace_period > heartbeat_interval; got "
                             f"{self.heartbeat_interval} and {self.grace_period}")
        if not self.study_name or "/" in self.study_name or self.study_name in (".", ".."):
            raise ValueError(f"study name {self.study_name!r} must be non-empty and name one folder under runs/")


class SweepError(RuntimeError):
    """A worker gave up (too many failed trials in a row)."""


class SurplusTrial(RuntimeError):
    """A trial started while the study's last slots were already taken by running trials."""


# -- building blocks ------------------------------------------------------------------------------
def safe_url(url: str) -> str:
    """The storage URL with any password hidden (for messages)."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url.split("@")[-1] if "@" in url else url


def make_storage(url: str, *, heartbeat_interval: int = 60, grace_period: int = 180,
                 max_retry: int | None = 2) -> RDBStorage:
    """An RDB storage with heartbeats and retries of stale trials (SQLite folders are created)."""
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///"):]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine_kwargs: dict[str, Any] = {"connect_args": {"timeout": 60}}  # workers wait for the file lock
    else:
        engine_kwargs = {"pool_pre_ping": True}
    from sqlalchemy.exc import DBAPIError

    for attempt in range(4):
        try:
            with warnings.catch_warnings():  # heartbeats and retries are marked experimental in Optuna
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return RDBStorage(url, engine_kwargs=engine_kwargs, heartbeat_interval=heartbeat_interval,
                                  grace_period=grace_period,
                                  heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=max_retry))
        except DBAPIError:
            # Workers started together race to create the tables of a new database: the loser
            # retries and finds them.  Connection errors persist and are raised after the tries.
            if attempt == 3:
                raise
            time.sleep(0.5 + attempt)
    raise AssertionError("unreachable")


def make_sampler(name: str = "tpe", seed: int | None = None) -> optuna.samplers.BaseSampler:
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    raise ValueError(f"unknown sampler {name!r}; expected one of {', '.join(SAMPLERS)}")


def make_pruner(name: str = "median", startup_trials: int = 5, warmup_steps: int = 0) -> optuna.pruners.BasePruner:
    if name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=startup_trials, n_warmup_steps=warmup_steps)
    if name == "halving":
        return optuna.pruners.SuccessiveHalvingPruner()
    if name == "hyperband":
        return optuna.pruners.HyperbandPruner()
    if name == "none":
        return optuna.pruners.NopPruner()
    raise ValueError(f"unknown pruner {name!r}; expected one of {', '.join(PRUNERS)}")


def open_study(settings: SweepSettings, space: SearchSpace | None = None, *,
               sampler: optuna.samplers.BaseSampler | None = None,
               pruner: optuna.pruners.BasePruner | None = None, log: Log = print) -> optuna.Study:
    """Create the study or join it (``load_if_exists``); the space is stored on the study."""
    storage = make_storage(settings.storage, heartbeat_interval=settings.heartbeat_interval,
                           grace_period=settings.grace_period, max_retry=settings.max_retry)
    study = optuna.create_study(
        storage=storage, study_name=settings.study_name, direction="minimize", load_if_exists=True,
        sampler=sampler or make_sampler(settings.sampler, settings.seed),
        pruner=pruner or make_pruner(settings.pruner, settings.pruner_startup_trials, settings.pruner_warmup_steps))
    if space is not None:
        stored, current = study.user_attrs.get("space"), space.to_dict()
        if stored is None:
            study.set_user_attr("space", current)
            if space.path is not None:
                study.set_user_attr("space_file", str(space.path))
        elif stored != current:
            log(f"warning: study {settings.study_name!r} was started with another search space "
                f"({study.user_attrs.get('space_file', 'unknown file')}); trials will mix both")
    return study


def counts(study: optuna.Study) -> tuple[int, int]:
    """``(finished, running)`` trials of the study, after failing the stale ones (heartbeat)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)
    trials = study.get_trials(deepcopy=False, states=(*FINISHED, TrialState.RUNNING))
    finished = sum(t.state in FINISHED for t in trials)
    return finished, len(trials) - finished


def wait_for_open_slot(study: optuna.Study, n_trials: int, poll_s: float, log: Log = print) -> bool:
    """True when this worker should start a trial; False when the study has ``n_trials``.

    While the running trials (of any worker) would complete the study, wait: one of them may
    die, and its retry then needs a worker.
    """
    said = False
    while True:
        finished, running = counts(study)
        if finished >= n_trials:
            return False
        if finished + running < n_trials:
            return True
        if not said:
            log(f"{finished}/{n_trials} trials finished; waiting for the {running} running one(s) "
                f"(a trial whose worker dies is retried here)")
            said = True
        time.sleep(poll_s)


# -- the objective -------------------------------------------------------------------------------
class Objective:
    """One trial: sample the space, train in ``runs/<study>/<number>/``, return the best validation cost.

    User attrs of each trial: ``run_dir``, ``host`` and ``pid`` of its worker, ``best_checkpoint``,
    ``final_global_step``, ``stopped_reason``, ``val_curve`` (``[[global_step, cost], ...]``) and,
    for a retry, ``retry_of`` (the number of the trial whose worker died).
    """

    def __init__(self, base_cfg: dict, space: SearchSpace, study_name: str, n_trials: int) -> None:
        self.base_cfg, self.space, self.study_name, self.n_trials = base_cfg, space, study_name, n_trials
        self.runs_dir = Path(base_cfg["runs_dir"]) / study_name

    def _check_not_surplus(self, trial: optuna.Trial) -> None:
        """Trial numbers order the workers' claims: the first ``n_trials`` live ones count."""
        earlier = [t for t in trial.study.get_trials(deepcopy=False, states=(*FINISHED, TrialState.RUNNING))
                   if t.number < trial.number]
        if len(earlier) >= self.n_trials:
            trial.set_user_attr("stopped_reason", "surplus")
            raise SurplusTrial(f"trial {trial.number}: the study's {self.n_trials} trials are already "
                               f"finished or running; nothing trained")

    def __call__(self, trial: optuna.Trial) -> float:
        self._check_not_surplus(trial)
        params = self.space.suggest(trial)
        cfg = apply_params(self.base_cfg, params)
        cfg["runs_dir"], cfg["run_name"] = str(self.runs_dir), str(trial.number)
        cfg["train"]["copy_final_model"] = False  # trials keep their models in their own run folders
        run_dir = self.runs_dir / str(trial.number)
        # A retry inherits the failed trial's user attrs: overwrite them all.
        attrs: dict[str, Any] = {"run_dir": str(run_dir), "host": socket.gethostname(), "pid": os.getpid(),
                                 "best_checkpoint": None, "final_global_step": 0, "stopped_reason": "running",
                                 "val_curve": []}
        frozen = next(t for t in trial.study.get_trials(deepcopy=False) if t.number == trial.number)
        retry_of = frozen.system_attrs.get("failed_trial")  # set by RetryHeartbeatStaleTrialCallback
        if retry_of is not None:
            attrs["retry_of"] = retry_of
        for k, v in attrs.items():
            trial.set_user_attr(k, v)

        pruned: list[tuple[int, float]] = []

        def on_validation(step: int, cost: float) -> None:
            trial.report(cost, step)
            if not pruned and trial.should_prune():
                pruned.append((step, cost))

        try:
            outcome = train_and_score(cfg, on_validation=on_validation, should_stop=lambda: bool(pruned))
        except Exception as exc:
            trial.set_user_attr("stopped_reason", f"error: {type(exc).__name__}: {exc}"[:500])
            raise
        res = outcome.result
        reason = "pruned" if pruned else res.stopped_because
        trial.set_user_attr("best_checkpoint", str(outcome.best_checkpoint) if outcome.best_checkpoint else None)
        trial.set_user_attr("final_global_step", int(res.global_step))
        trial.set_user_attr("stopped_reason", reason)
        trial.set_user_attr("val_curve", [[s, c] for s, c in outcome.curve])
        if pruned:
            step, cost = pruned[0]
            raise optuna.TrialPruned(f"validation cost {cost:.3f} at step {step}")
        return outcome.value


# -- reporting -----------------------------------------------------------------------------------
def format_params(params: dict[str, Any]) -> str:
    return "  ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items())


def trial_line(study: optuna.Study, trial: FrozenTrial, n_trials: int) -> str:
    """One line per finished trial: number, state, value, best so far, duration, parameters."""
    finished = len(study.get_trials(deepcopy=False, states=FINISHED))
    took = f"{trial.duration.total_seconds() / 60:.1f} min" if trial.duration else "-"
    attrs = trial.user_attrs
    if trial.state == TrialState.COMPLETE:
        what = f"cost {trial.value:.4f}"
    elif trial.state == TrialState.PRUNED:
        curve = attrs.get("val_curve") or [[trial.last_step, float("nan")]]
        what = f"pruned at step {curve[-1][0]} (cost {curve[-1][1]:.4f})"
    else:
        what = f"failed ({attrs.get('stopped_reason', 'error')})"
    try:
        best = f"best {study.best_value:.4f} (#{study.best_trial.number})"
    except ValueError:
        best = "best -"
    return (f"[{finished}/{n_trials}] trial {trial.number} {trial.state.name}: {what}; {best}; {took}; "
            f"{format_params(trial.params)}")


def eval_command(trial: FrozenTrial) -> str:
    ckpt = trial.user_attrs.get("best_checkpoint") or str(Path(trial.user_attrs.get("run_dir", "runs/?"))
                                                           / "checkpoints" / "best.pt")
    return f"python eval.py --model_path {ckpt} --data_path data --num_segs 100 --report report.html"


def summary_lines(study: optuna.Study) -> list[str]:
    """The study's state and, when it has one, the best trial and how to evaluate it."""
    trials = study.get_trials(deepcopy=False)
    by_state = {s.name: sum(t.state == s for t in trials) for s in TrialState}
    lines = [f"study {study.study_name!r}: " + ", ".join(f"{n} {k.lower()}" for k, n in by_state.items() if n)]
    try:
        best = study.best_trial
    except ValueError:
        return lines + ["no completed trial yet"]
    host = best.user_attrs.get("host")
    lines += [f"best: trial {best.number}, validation cost {best.value:.4f}" + (f" (ran on {host})" if host else ""),
              f"  params: {format_params(best.params)}",
              f"  run: {best.user_attrs.get('run_dir')}",
              f"  evaluate: {eval_command(best)}"]
    return lines


# -- a worker ----------------------------------------------------------------------------------------
def run_sweep(base_cfg: dict, space: SearchSpace, settings: SweepSettings, *,
              sampler: optuna.samplers.BaseSampler | None = None, pruner: optuna.pruners.BasePruner | None = None,
              log: Log = print) -> optuna.Study:
    """Run trials of ``settings.study_name`` until the study has ``settings.n_trials`` finished ones.

    ``base_cfg`` is the config every trial starts from (``fixed`` settings, overrides and the
    time budget already applied); ``sampler`` / ``pruner`` replace the ones named in ``settings``.

    Raises:
        SweepError: after ``settings.max_failures`` consecutive failed trials of this worker.
    """
    study = open_study(settings, space, sampler=sampler, pruner=pruner, log=log)
    n = settings.n_trials
    poll_s = min(5.0, settings.heartbeat_interval / 2)  # a waiting worker notices a finished or dead trial soon
    if not wait_for_open_slot(study, n, poll_s, log):
        log(f"study {settings.study_name!r} already has {n} finished trials; nothing to do "
            f"(raise --n-trials to continue it)")
        return study

    lock = threading.Lock()
    failures = {"consecutive": 0, "gave_up": False}

    def after_trial(study: optuna.Study, trial: FrozenTrial) -> None:
        if trial.user_attrs.get("stopped_reason") == "surplus":
            log(f"trial {trial.number}: not needed (the study's last trials were already running)")
        else:
            log(trial_line(study, trial, n))
        with lock:
            if trial.state == TrialState.FAIL and trial.user_attrs.get("stopped_reason") != "surplus":
                failures["consecutive"] += 1
                if failures["consecutive"] >= settings.max_failures:
                    failures["gave_up"] = True
                    study.stop()
                    return
            elif trial.state in FINISHED:
                failures["consecutive"] = 0
        if not wait_for_open_slot(study, n, poll_s, log):
            study.stop()

    objective = Objective(base_cfg, space, settings.study_name, n)
    study.optimize(objective, n_jobs=settings.n_jobs, catch=(Exception,),
                   callbacks=[MaxTrialsCallback(n, states=FINISHED), after_trial])
    if failures["gave_up"]:
        raise SweepError(f"{settings.max_failures} trials in a row failed in this worker; stopped (see the "
                           f"errors above and the trials' 'stopped_reason')")
    return study


def load_trial_params(storage: str, study_name: str, number: int | None = None) -> tuple[dict[str, Any], FrozenTrial]:
    """The parameters of trial ``number`` (default: the best trial) of a stored study."""
    try:
        study = optuna.load_study(study_name=study_name, storage=storage)
    except KeyError:
        raise ValueError(f"no study {study_name!r} in {safe_url(storage)}") from None
    if number is None:
        try:
            trial = study.best_trial
        except ValueError:
            raise ValueError(f"study {study_name!r} has no completed trial yet") from None
    else:
        found = [t for t in study.get_trials(deepcopy=False) if t.number == number]
        if not found:
            raise ValueError(f"study {study_name!r} has no trial {number}")
        trial = found[0]
    return dict(trial.params), trial
