"""Train a PPO steering policy on TinyPhysics.

    ppo-train --config config.yaml [--n-envs 32] [--device auto] [--seed 0]
              [--total-timesteps 2000000] [--run-name NAME] [--resume auto|PATH]

(``python train.py ...`` in the checkout runs the same.)

Writes runs/<name>/ (TensorBoard logs, checkpoints/, training_stats.npz) and models/final_model.pt.
"""
from __future__ import annotations

import argparse
import sys

from ppo_training.data.segments import SegmentError
from ppo_training.training import load_config, train
from ppo_training.utils.checkpoint import CheckpointError


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=None, help="YAML config (default: config.yaml of the project)")
    p.add_argument("--n-envs", type=int, help="parallel environments")
    p.add_argument("--env-kind", choices=["vector", "async"], help="batched engine or worker processes")
    p.add_argument("--start-method", choices=["fork", "spawn", "forkserver"], help="async workers' start method")
    p.add_argument("--device", help="auto | cpu | cuda | mps")
    p.add_argument("--seed", type=int)
    p.add_argument("--total-timesteps", type=int)
    p.add_argument("--time-budget", type=float, help="stop after this many seconds")
    p.add_argument("--data-path", help="folder of training segments")
    p.add_argument("--run-name")
    p.add_argument("--resume", help="'auto' (newest checkpoint of --run-name) or a checkpoint path")
    args = p.parse_args(argv)
    overrides = {
        "env.n_envs": args.n_envs, "env.kind": args.env_kind, "env.start_method": args.start_method,
        "device": args.device, "seed": args.seed, "train.total_timesteps": args.total_timesteps,
        "train.time_budget_s": args.time_budget, "data.path": args.data_path, "run_name": args.run_name,
    }
    try:
        cfg = load_config(args.config, overrides)
        if args.resume == "auto" and not cfg.get("run_name"):
            raise ValueError("--resume auto needs --run-name (or run_name in the config)")
        result = train(cfg, resume=args.resume)
    except (FileNotFoundError, ValueError, KeyError, SegmentError, CheckpointError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"run: {result.run_dir}  stopped: {result.stopped_because}  steps: {result.global_step}")
    print(f"best validation cost: {result.best_val_cost:.3f}  final model: {result.final_model}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
