"""Training utilities: rollout buffer, checkpoints, logging."""
