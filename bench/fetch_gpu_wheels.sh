#!/usr/bin/env bash
# Download the Python packages that bench/gpu_run.sh installs on the GPU machine into .whl/.
#
#   bash bench/fetch_gpu_wheels.sh            # needs network (PyPI); writes .whl/*.whl
#
# The GPU machine is offline and its python3 (CPython 3.12, x86-64 Linux) already has numpy,
# torch, onnxruntime, onnx, pandas, PyYAML, tensorboard, matplotlib, tqdm, pytest, requests, click,
# attrs, python-dateutil, typing-extensions, cloudpickle, packaging, psutil, pygments, ... but not
# gymnasium or the notebook stack.  This list is the closure of what the package and
# notebooks/02_train_ppo.ipynb under papermill import, minus what the machine has: one pinned
# version of each, cp312 manylinux x86_64 or pure-python wheels, installed there with --no-deps
# (so nothing the machine has is ever replaced).  Versions are those of requirements.txt and the
# project's tested environment.  Left out on purpose: aiohttp (papermill lists it for Python 3.12
# but never imports it) and debugpy (ipykernel runs without it; it only enables the debugger).
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=.whl
PYTHON=${PYTHON:-python3}

WHEELS=(
  # environments
  gymnasium==1.4.0 farama-notifications==0.0.6
  # headless notebooks: papermill -> nbclient -> jupyter_client -> kernel
  papermill==2.7.0 entrypoints==0.4.2 tenacity==9.2.1
  nbclient==0.11.0 nbformat==5.11.1 fastjsonschema==2.22.3
  jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1
  jupyter_client==8.10.0 jupyter_core==5.9.1 platformdirs==4.14.8 traitlets==5.16.1
  pyzmq==27.3.0 tornado==6.6.1
  # the kernel
  ipykernel==6.29.5 comm==0.2.3 matplotlib-inline==0.2.2 nest-asyncio==1.6.0
  ipython==9.18.1 ipython_pygments_lexers==1.1.1 jedi==0.20.1 parso==0.8.7 pexpect==4.9.0
  ptyprocess==0.7.0 prompt_toolkit==3.0.53 wcwidth==0.9.4 stack_data==0.6.3 executing==2.3.0
  asttokens==3.0.2 pure_eval==0.2.4
  # the dashboard's widgets (optional at run time; present where the project is tested)
  ipywidgets==8.1.9 widgetsnbextension==4.0.16 jupyterlab_widgets==3.0.17 jupyter-ui-poll==1.1.0
)

mkdir -p "$DEST"
rm -f "$DEST"/*.whl
for spec in "${WHEELS[@]}"; do
  "$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$DEST" "$spec"
done
n=$(ls "$DEST"/*.whl | wc -l)
if [ "$n" -ne "${#WHEELS[@]}" ]; then
  echo "error: expected ${#WHEELS[@]} wheels in $DEST, found $n" >&2
  exit 1
fi
(cd "$DEST" && sha256sum ./*.whl > SHA256SUMS)
echo "$n wheels, $(du -sh "$DEST" | cut -f1) in $DEST"
