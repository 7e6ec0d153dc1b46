"""PPO steering workbench for the comma.ai Controls Challenge (TinyPhysics)."""
from pathlib import Path

#: Root of the project checkout (parent of this package); default home of models/, data/, runs/.
PROJECT_ROOT = Path(__file__).resolve().parent.parent

__all__ = ["PROJECT_ROOT"]
