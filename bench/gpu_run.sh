#!/usr/bin/env bash
# The one-shot GPU run (see bench/README.md): every GPU check of the project, each step under its
# own time limit, everything logged, results merged into OUTDIR/gpu_run.json.
#
#   bash bench/gpu_run.sh [options] OUTDIR
#
#   --quick            toy sizes on the CPU (a smoke run of every step; CI runs it)
#   --train-min M      minutes of training in the train step (default 2.5)
#   --nb-budget-s S    seconds of training in the notebook step (default 60)
#   --total-s S        wall-time budget of the whole run, start-up included (default 540); later
#                      steps get what is left when earlier ones ran long
#   --assets DIR       model and segments (default .gpu_assets, made by bench/prepare_gpu_assets.sh)
#   --limit STEP=S     time limit of one step in seconds (repeatable), e.g. --limit throughput=150
#   --only STEP,...    run only these steps (a second, shorter run after fixing a failed step)
#   --device DEV       default: cuda (cpu with --quick)
#   PYTHON=...         interpreter (default python3)
#
# Needs: .whl/ (bash bench/fetch_gpu_wheels.sh) unless the packages already import, .gpu_assets/.
# OUTDIR receives at most 8 files, none in sub-folders: gpu_run.json, gpu_run.log, throughput.png,
# ppo_gpu.pt, train_ppo.ipynb, dashboard.png, sample_rollout.png.  Exit status: 0 when every step
# succeeded, 1 when some did not (gpu_run.json says which and why), 3 when no JSON was written.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PYTHON=${PYTHON:-python3}
STARTED=$(date +%s)

QUICK=0 TRAIN_MIN=2.5 NB_BUDGET_S=60 TOTAL_S="" ASSETS=$ROOT/.gpu_assets DEVICE="" OUT="" USER_LIMITS=() ONLY=""
declare -A LIMIT=([info]=60 [correctness]=45 [throughput]=90 [eval5k]=30 [ppo]=60 [profile]=35
                  [train]=0 [notebook]=170)
# a step squeezed below its minimum by the run's budget is skipped instead of started
declare -A MIN_S=([info]=10 [correctness]=10 [throughput]=20 [eval5k]=10 [ppo]=20 [profile]=15
                  [train]=90 [notebook]=45)
usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --train-min) TRAIN_MIN=$2; shift ;;
    --nb-budget-s) NB_BUDGET_S=$2; shift ;;
    --total-s) TOTAL_S=$2; shift ;;
    --assets) ASSETS=$(realpath -m "$2"); shift ;;
    --device) DEVICE=$2; shift ;;
    --limit) USER_LIMITS+=("$2"); shift ;;
    --only) ONLY=",$2,"; shift ;;
    -h|--help) usage 0 ;;
    -*) echo "unknown option $1" >&2; usage ;;
    *) [ -z "$OUT" ] || usage; OUT=$1 ;;
  esac
  shift
done
[ -n "$OUT" ] || usage
if [ "$QUICK" = 1 ]; then
  LIMIT=([info]=60 [correctness]=60 [throughput]=90 [eval5k]=60 [ppo]=60 [profile]=60 [train]=90 [notebook]=180)
  MIN_S=([info]=10 [correctness]=10 [throughput]=10 [eval5k]=10 [ppo]=10 [profile]=10 [train]=10 [notebook]=10)
  [ -n "$DEVICE" ] || DEVICE=cpu
  TOTAL_S=${TOTAL_S:-600}
fi
TOTAL_S=${TOTAL_S:-540}
for kv in "${USER_LIMITS[@]}"; do
  [ -n "${LIMIT[${kv%%=*}]+x}" ] || { echo "unknown step in --limit $kv" >&2; exit 2; }
  LIMIT[${kv%%=*}]=${kv#*=}
done
# the train step: its minutes plus behaviour cloning, start-up, final validation and scoring
[ "${LIMIT[train]}" != 0 ] || LIMIT[train]=$(awk -v m="$TRAIN_MIN" 'BEGIN { printf "%d", m * 60 + 60 }')
DEADLINE=$((STARTED + TOTAL_S))

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu_run.XXXXXX")
mkdir -p "$WORK/status"
LOG=$OUT/gpu_run.log
: > "$LOG"
exec > >(tee -a "$LOG") 2>&1
TEE_PID=$!
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg
echo "gpu_run: $(date -u +%FT%TZ) on $(uname -n), OUTDIR $OUT, work $WORK, quick=$QUICK, train ${TRAIN_MIN} min,"\
     "total budget ${TOTAL_S} s"

# -- packages: the wheels in .whl/ into a site folder outside the repo, never over the machine's
SITE=${GPU_RUN_SITE:-/tmp/site}
if [ "$QUICK" = 1 ] && "$PYTHON" -c "import gymnasium, papermill, nbclient, ipykernel" 2>/dev/null; then
  echo "packages: already importable, wheel install skipped"
  export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
else
  t0=$(date +%s)
  if ! ls .whl/*.whl >/dev/null 2>&1; then
    echo "packages: no wheels in .whl/ (make them with: bash bench/fetch_gpu_wheels.sh)"
  elif ! "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
         --target "$SITE" .whl/*.whl; then
    # no pip (or it refused): a wheel is a zip of the installed files
    echo "packages: pip install failed; unpacking the wheels into $SITE instead"
    "$PYTHON" - "$SITE" .whl/*.whl <<'PY'
import sys, zipfile
for w in sys.argv[2:]:
    zipfile.ZipFile(w).extractall(sys.argv[1])
PY
  fi
  export PYTHONPATH=$SITE:$ROOT${PYTHONPATH:+:$PYTHONPATH}
  echo "packages: $(ls .whl/*.whl 2>/dev/null | wc -l) wheels into $SITE in $(( $(date +%s) - t0 )) s"
fi

COMMON=(--work "$WORK" --out "$OUT" --assets "$ASSETS" --started "$STARTED" --train-min "$TRAIN_MIN"
        --nb-budget-s "$NB_BUDGET_S")
[ -n "$DEVICE" ] && COMMON+=(--device "$DEVICE")
[ "$QUICK" = 1 ] && COMMON+=(--quick)
MERGE_RESERVE=15

run_step() {  # run_step NAME [extra args]: under `timeout`, status into $WORK/status/NAME.json
  local name=$1; shift
  if [ -n "$ONLY" ] && [[ "$ONLY" != *",$name,"* ]]; then
    printf '{"step": "%s", "status": "not run", "reason": "--only"}\n' "$name" > "$WORK/status/$name.json"
    return
  fi
  local limit=${LIMIT[$name]} now left status rc t0 t1
  now=$(date +%s)
  left=$((DEADLINE - now - MERGE_RESERVE))
  [ "$left" -lt "$limit" ] && limit=$left
  echo
  echo "=== $name: limit ${limit} s ($(date -u +%T), $((now - STARTED)) s into the run)"
  if [ "$limit" -lt "${MIN_S[$name]}" ]; then
    echo "=== $name: skipped, ${left} s left of the run's budget (needs ${MIN_S[$name]} s)"
    printf '{"step": "%s", "status": "skipped", "reason": "run budget spent", "limit_s": %d}\n' \
      "$name" "$limit" > "$WORK/status/$name.json"
    return
  fi
  t0=$(date +%s.%N)
  timeout --kill-after=10 "$limit" "$PYTHON" bench/gpu_run.py "$name" "${COMMON[@]}" \
    --step-deadline $((now + limit)) "$@"
  rc=$?
  t1=$(date +%s.%N)
  case $rc in
    0) status=ok ;;
    124|137) status=timeout ;;
    *) status=failed ;;
  esac
  echo "=== $name: $status (exit $rc) in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s"
  printf '{"step": "%s", "status": "%s", "rc": %d, "wall_s": %s, "limit_s": %d}\n' "$name" "$status" "$rc" \
    "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')" "$limit" > "$WORK/status/$name.json"
}

# Order: the short measurements, the training (its budget shrinks if the run's budget demands it),
# then the notebook, whose training budget adapts to what is left.
run_step info
run_step correctness
run_step throughput
run_step eval5k
run_step ppo
run_step profile
run_step train
run_step notebook

echo
echo "=== merge ($(( $(date +%s) - STARTED )) s into the run)"
timeout 60 "$PYTHON" bench/gpu_run.py merge "${COMMON[@]}"
rc=$?
# exit status: 0 when every step succeeded, 1 when one did not (the JSON says which), 3 without JSON
n_ok=$(cat "$WORK"/status/*.json 2>/dev/null | grep -c '"status": "ok"')
n_run=$(cat "$WORK"/status/*.json 2>/dev/null | grep -vc '"status": "not run"')
if [ "$rc" != 0 ] || [ ! -f "$OUT/gpu_run.json" ]; then rc=3; elif [ "$n_ok" -lt "$n_run" ]; then rc=1; fi
echo "gpu_run: done in $(( $(date +%s) - STARTED )) s; results in $OUT:"
ls -la "$OUT"
rm -rf "$WORK"
exec 1>&- 2>&-
wait "$TEE_PID" 2>/dev/null  # the log is complete before the run returns
exit $rc
