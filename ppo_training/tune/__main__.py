"""Command line of ``ppo_training.tune``: sweeps (default), seed studies and comparisons.

    python -m ppo_training.tune --config config.yaml --space sweeps/ppo.yaml --n-trials 50 \\
        [--storage sqlite:///runs/tune.db] [--study NAME] [--n-jobs 1] [--budget-min 20] [--seed 0] \\
        [--set key=value ...]
    python -m ppo_training.tune seeds --config config.yaml --seeds 5 [--name NAME] \\
        [--set key=value ...] [--budget-min 20] [--from-study NAME [--storage URL] [--trial N]]
    python -m ppo_training.tune compare NAME_A NAME_B
"""
from __future__ import annotations

import argparse
import datetime as _dt
import sys
from pathlib import Path
from typing import Any

import yaml

COMMANDS = ("sweep", "seeds", "compare")


def parse_sets(items: list[str] | None) -> dict[str, Any]:
    """``["ppo.gamma=0.95", "policy.hidden=64,64"]`` -> dotted overrides (values read as YAML)."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--set {item!r}: expected key=value, e.g. --set ppo.gamma=0.95")
        try:
            out[key.strip()] = yaml.safe_load(value) if value.strip() else None
        except yaml.YAMLError:
            raise ValueError(f"--set {item!r}: the value is not valid YAML") from None
    return out


def base_config(config: str | None, sets: dict[str, Any], budget_min: float | None,
                fixed: dict[str, Any] | None = None, space_file: str | None = None) -> dict:
    """config file, then the space's ``fixed`` settings, then ``--set``, then ``--budget-min``."""
    from ..training import load_config
    from .space import apply_params

    cfg = load_config(config)
    name = config or "config.yaml"
    for source, values in ((space_file, fixed), ("--set", sets)):
        try:
            cfg = apply_params(cfg, values or {})
        except KeyError as exc:
            raise ValueError(f"{source}: {exc.args[0]} ({name} has no such setting)") from None
        except ValueError as exc:
            raise ValueError(f"{source}: {exc}") from None
    if budget_min is not None:
        if budget_min <= 0:
            raise ValueError(f"--budget-min must be positive, got {budget_min}")
        cfg["train"]["time_budget_s"] = float(budget_min) * 60
    return cfg


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default=None, help="YAML config every run starts from (default: config.yaml)")
    p.add_argument("--set", dest="sets", action="append", metavar="KEY=VALUE",
                   help="override a dotted config key for every run (repeatable), e.g. --set env.n_envs=32")
    p.add_argument("--budget-min", type=float, default=None,
                   help="wall-time cap of each training run in minutes (train.time_budget_s)")


def sweep_parser() -> argparse.ArgumentParser:
    from .study import DEFAULT_STORAGE, PRUNERS, SAMPLERS

    p = argparse.ArgumentParser(
        prog="python -m ppo_training.tune",
        description="Optuna sweep of training runs; any number of workers may run this same command "
                    "against one study.  Other commands: `seeds` (one config over seeds), `compare` "
                    "(two seed studies); see `python -m ppo_training.tune seeds -h`.")
    _common(p)
    p.add_argument("--space", required=True, help="search-space YAML (see sweeps/ppo.yaml)")
    p.add_argument("--n-trials", type=int, required=True,
                   help="the study's total of finished (complete + pruned) trials, over all workers")
    p.add_argument("--storage", default=DEFAULT_STORAGE,
                   help=f"SQLAlchemy URL of the study database (default {DEFAULT_STORAGE}); e.g. "
                        f"postgresql+psycopg2://user:pw@host/db for many machines")
    p.add_argument("--study", default=None, help="study name (default: the space file's name, e.g. ppo)")
    p.add_argument("--n-jobs", type=int, default=1, help="trials this worker runs at once (threads; they share torch's global RNG, so such trials are "
                        "not bit-reproducible: prefer several single-job workers)")
    p.add_argument("--seed", type=int, default=None,
                   help="sampler seed (give each worker its own); the training seed is the config's `seed`")
    p.add_argument("--sampler", choices=SAMPLERS, default="tpe")
    p.add_argument("--pruner", choices=PRUNERS, default="median")
    p.add_argument("--pruner-startup-trials", type=int, default=5,
                   help="median pruner: prune nothing until this many trials finished")
    p.add_argument("--pruner-warmup-steps", type=int, default=0,
                   help="median pruner: prune no trial before this many environment steps")
    p.add_argument("--heartbeat-interval", type=int, default=60, help="seconds between a trial's heartbeats")
    p.add_argument("--grace-period", type=int, default=180,
                   help="seconds without a heartbeat after which a running trial counts as dead (FAIL, retried)")
    p.add_argument("--max-retry", type=int, default=2, help="retries of a trial whose worker died")
    return p


def seeds_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m ppo_training.tune seeds",
        description="Train one configuration over several seeds; report mean, std and a bootstrap 95% CI "
                    "of the best validation cost; write runs/<name>/seeds.json and seeds.png.")
    _common(p)
    p.add_argument("--seeds", type=int, required=True, help="number of seeds")
    p.add_argument("--first-seed", type=int, default=0, help="seeds are first-seed, first-seed+1, ...")
    p.add_argument("--name", default=None,
                   help="output folder runs/<name>/ under the config's runs_dir (default: seeds_<date>_<time>)")
    p.add_argument("--from-study", default=None, help="use the parameters of this study's best trial")
    p.add_argument("--trial", type=int, default=None, help="with --from-study: this trial instead of the best")
    p.add_argument("--storage", default=None, help="with --from-study: the study database (default sqlite:///runs/tune.db)")
    p.add_argument("--no-references", action="store_true", help="skip the teacher and PID reference costs")
    return p


def compare_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m ppo_training.tune compare",
        description="Compare two seed studies: each one's mean, std and 95% CI, and the difference of the "
                    "means (B - A) with its bootstrap 95% CI.")
    p.add_argument("a", help="seed study A: a name under --runs-dir, its folder or its seeds.json")
    p.add_argument("b", help="seed study B")
    p.add_argument("--runs-dir", default="runs")
    return p


def cmd_sweep(argv: list[str]) -> int:
    import optuna

    from .space import SearchSpace
    from .study import SweepSettings, run_sweep, safe_url, summary_lines

    args = sweep_parser().parse_args(argv)
    settings = SweepSettings(
        study_name=args.study or Path(args.space).stem, n_trials=args.n_trials, storage=args.storage,
        n_jobs=args.n_jobs, seed=args.seed, sampler=args.sampler, pruner=args.pruner,
        pruner_startup_trials=args.pruner_startup_trials, pruner_warmup_steps=args.pruner_warmup_steps,
        heartbeat_interval=args.heartbeat_interval, grace_period=args.grace_period, max_retry=args.max_retry)
    from ..training import load_config

    space = SearchSpace.load(args.space, load_config(args.config), args.config or "config.yaml")
    cfg = base_config(args.config, parse_sets(args.sets), args.budget_min, space.fixed, args.space)
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # one line per trial is printed below instead
    print(f"study {settings.study_name!r} in {safe_url(settings.storage)}: {settings.n_trials} trials in all, "
          f"sampler {settings.sampler}, pruner {settings.pruner}, runs in {Path(cfg['runs_dir']) / settings.study_name}/")
    for p in space.params:
        print(f"  {p.describe()}")
    print(f"dashboard: optuna-dashboard {safe_url(settings.storage)}", flush=True)
    study = run_sweep(cfg, space, settings, log=lambda s: print(s, flush=True))
    print("\n".join(summary_lines(study)))
    return 0


def cmd_seeds(argv: list[str]) -> int:
    from .seeds import run_seeds
    from .space import apply_params
    from .study import DEFAULT_STORAGE, format_params, load_trial_params

    args = seeds_parser().parse_args(argv)
    cfg = base_config(args.config, parse_sets(args.sets), args.budget_min)
    params: dict[str, Any] = {}
    if args.from_study:
        params, trial = load_trial_params(args.storage or DEFAULT_STORAGE, args.from_study, args.trial)
        cfg = apply_params(cfg, params)
        print(f"parameters of trial {trial.number} of study {args.from_study!r}: {format_params(params)}")
    elif args.trial is not None or args.storage:
        raise ValueError("--trial and --storage need --from-study")
    name = args.name or "seeds_" + _dt.datetime.now().strftime("%Y%m%d_%H%M%S")
    run_seeds(cfg, args.seeds, name, first_seed=args.first_seed, references=not args.no_references,
              params=params, log=lambda s: print(s, flush=True))
    return 0


def cmd_compare(argv: list[str]) -> int:
    from .seeds import compare_table, load_summary

    args = compare_parser().parse_args(argv)
    print(compare_table(load_summary(args.a, args.runs_dir), load_summary(args.b, args.runs_dir)))
    return 0


def main(argv: list[str] | None = None) -> int:
    from ..data.segments import SegmentError
    from ..utils.checkpoint import CheckpointError
    from .study import SweepError

    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv.pop(0) if argv and argv[0] in COMMANDS else "sweep"
    run = {"sweep": cmd_sweep, "seeds": cmd_seeds, "compare": cmd_compare}[command]
    try:
        return run(argv)
    except (FileNotFoundError, ValueError, KeyError, SegmentError, CheckpointError, SweepError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # database errors: name the storage, not a traceback of SQLAlchemy
        from sqlalchemy.exc import SQLAlchemyError

        if isinstance(exc, SQLAlchemyError):
            print(f"error: study database: {getattr(exc, 'orig', None) or exc}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
