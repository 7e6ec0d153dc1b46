"""Policies: the torch actor-critic, PPO, behaviour cloning, the numpy actor, and their construction."""
