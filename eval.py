#!/usr/bin/env python
"""Evaluate a controller or a trained policy: ``python eval.py --help`` (same as ``ppo-eval``)."""
import sys

from ppo_training.cli.evaluate import main

if __name__ == "__main__":
    sys.exit(main())
