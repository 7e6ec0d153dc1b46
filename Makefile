# One-command workflows.  Assets come from upstream, or from a local copy named by
# TINYPHYSICS_ASSETS (a folder with models/ and data/, a challenge checkout, or the data zip).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
FROM   := $(if $(TINYPHYSICS_ASSETS),--from "$(TINYPHYSICS_ASSETS)",)

SYNTH  := data/synthetic/synthetic_manifest.json

.PHONY: setup assets synthetic test train eval clean-venv

setup: $(VENV)/.installed

# The pinned requirements, then this project as an editable package (console scripts ppo-*).
$(VENV)/.installed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $@

assets: setup
	$(PY) -m ppo_training.assets fetch $(FROM)

test: setup assets
	$(PY) -m pytest -q

# 2,000 generated (synthetic) segments, for a config whose data.path is data/synthetic.
synthetic: $(SYNTH)
$(SYNTH): | setup
	$(PY) -m ppo_training.data.synth --n 2000 --out data/synthetic --seed 0

# Main job on defaults: train PPO with config.yaml on the fetched segments
# (runs/<name>/, models/final_model.pt).  A missing data.path folder is an error naming the fix.
train: setup assets
	$(PY) train.py --config config.yaml

# Evaluate the PID baseline on the first 100 segments of data/.
eval: setup assets
	$(PY) eval.py --controller pid --data_path data --num_segs 100 --output runs/pid_eval.csv

clean-venv:
	rm -rf $(VENV)
