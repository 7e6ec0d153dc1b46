# One-command workflows.  Assets come from upstream, or from a local copy named by
# TINYPHYSICS_ASSETS (a folder with models/ and data/, a challenge checkout, or the data zip).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
FROM   := $(if $(TINYPHYSICS_ASSETS),--from "$(TINYPHYSICS_ASSETS)",)

.PHONY: setup assets test train eval bench clean-venv

setup: $(VENV)/.installed

$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

assets: setup
	$(PY) -m ppo_training.assets fetch $(FROM)

test: setup assets
	$(PY) -m pytest -q

# Main job on defaults: evaluate the PID baseline on the first 100 segments.
train: setup assets
	$(PY) eval.py --controller pid --data_path data --num_segs 100 --output runs/pid_eval.csv

eval: train

clean-venv:
	rm -rf $(VENV)
