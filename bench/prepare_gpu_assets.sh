#!/usr/bin/env bash
# Copy the TinyPhysics model and the segment CSVs into .gpu_assets/ (git-ignored), the folder that
# travels to the GPU machine with the working tree and that bench/gpu_run.sh reads.
#
#   bash bench/prepare_gpu_assets.sh [SOURCE] [DEST]
#
# SOURCE: a local asset copy (a folder with models/ and data/, a challenge checkout, the data zip;
# default $TINYPHYSICS_ASSETS, else ../shared/tinyphysics).  DEST: default .gpu_assets.
# The result: DEST/models/tinyphysics.onnx (md5-checked) and DEST/data/*.csv, flat.  Evaluation
# files (00000.csv .. 04999.csv) and training files travel together; gpu_run.py trains only on
# the others.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
SRC=${1:-${TINYPHYSICS_ASSETS:-../shared/tinyphysics}}
DEST=${2:-.gpu_assets}
"$PYTHON" -m ppo_training.assets fetch --from "$SRC" --dest "$DEST" --no-progress
"$PYTHON" - "$DEST" <<'PY'
import sys
from pathlib import Path
d = Path(sys.argv[1])
csv = sorted(p.name for p in (d / "data").glob("*.csv"))
ev = [n for n in csv if n[:-4].isdigit() and int(n[:-4]) < 5000]
print(f"{d}: model {'OK' if (d / 'models' / 'tinyphysics.onnx').is_file() else 'MISSING'}, {len(csv)} CSV files "
      f"({len(ev)} evaluation files, {len(csv) - len(ev)} for training)")
if len(ev) < 8 or len(csv) == len(ev):
    sys.exit("error: need the eight evaluation files 00000-00007.csv and some training files")
PY
du -sh "$DEST"
