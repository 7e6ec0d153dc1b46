#!/usr/bin/env python
"""Train a PPO steering policy: ``python train.py --help`` (same as the ``ppo-train`` command)."""
import sys

from ppo_training.cli.train import main

if __name__ == "__main__":
    sys.exit(main())
