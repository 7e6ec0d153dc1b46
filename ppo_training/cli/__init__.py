"""Command-line entry points: ``ppo-train``, ``ppo-eval`` (also ``train.py`` and ``eval.py`` of the checkout)."""
