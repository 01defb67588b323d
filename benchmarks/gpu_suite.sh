#!/usr/bin/env bash
# Every GPU benchmark of the project in one run, each in its own process, in under 8 minutes on an H100.
#
#   OUT=/path/to/empty/dir bash benchmarks/gpu_suite.sh          # from the repository root
#
# Needs only python3 with torch and torchvision (and numpy, pillow, pyyaml, pandas, scikit-learn, tqdm):
# no dataset files (the data is generated), no kornia (benchmarks/common.py stands in for CMC's Lab
# conversion), no internet.  Writes under $OUT:
#   <benchmark>-<device>.json   one result per benchmark (device name with spaces as underscores),
#                               each naming the device, torch, torchvision, CUDA and cuDNN versions;
#   logs/<benchmark>.log        its output;  suite.json  what ran, its exit status and seconds.
# A failing or slow benchmark (each has a time limit) costs only its own result.  Copy the
# *.json results (not suite.json) to benchmarks/results/ and commit them:
# `python -m ring.cluster.batch estimate` then prices grids from them.
#
# Knobs: PYTHON (default python3); RING_SUITE_BUDGET_S (default 450: later benchmarks are skipped
# when the budget is spent); RING_SUITE_TINY=1 runs every benchmark at its --tiny size (the CPU
# smoke test); RING_SUITE_ONLY="name ..." runs only those benchmarks; RING_SUITE_TIMEOUT_S replaces
# every benchmark's own time limit (a loaded CPU); RING_BENCH_WARMUP /
# RING_BENCH_STEPS override the warm-up and timed steps of every measurement.
set -u
: "${OUT:?set OUT to the folder that receives the results}"
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
cd "$(dirname "$0")/.."  # the repository root, wherever it was started from
mkdir -p "$OUT/logs"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 RING_BENCH_RESULTS="$OUT"
PY=${PYTHON:-python3}
budget=${RING_SUITE_BUDGET_S:-450}
tiny=()
[ "${RING_SUITE_TINY:-0}" = 1 ] && tiny=(--tiny)
start=$SECONDS
summary=()

run() {  # run NAME LIMIT_S ARGS...: one benchmark in its own process, capped by its limit and the budget
  local name=$1 limit=${RING_SUITE_TIMEOUT_S:-$2} left rc t0
  shift 2
  if [ -n "${RING_SUITE_ONLY:-}" ] && [[ " $RING_SUITE_ONLY " != *" $name "* ]]; then return; fi
  left=$((budget - (SECONDS - start)))
  if ((left < 15)); then
    echo "== $name: skipped, the suite's ${budget}s budget is spent"
    summary+=("{\"name\": \"$name\", \"rc\": null, \"seconds\": 0, \"skipped\": true}")
    return
  fi
  ((limit > left)) && limit=$left
  echo "== $name (limit ${limit}s, $((SECONDS - start))s into the suite)"
  t0=$SECONDS
  # Progress lines only on the terminal (the result JSON is in the log and in its file).
  timeout -k 5 "$limit" "$PY" "$@" "${tiny[@]}" 2>&1 | tee "$OUT/logs/$name.log" | grep -v '^[ {}"\[]'
  rc=${PIPESTATUS[0]}
  echo "== $name: exit $rc after $((SECONDS - t0))s"
  summary+=("{\"name\": \"$name\", \"rc\": $rc, \"seconds\": $((SECONDS - t0)), \"skipped\": false}")
}

"$PY" - <<'PY' || true
import torch, torchvision
print("suite: torch", torch.__version__, "torchvision", torchvision.__version__, "cuda", torch.version.cuda,
      "device", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu", flush=True)
PY
nvidia-smi > "$OUT/logs/nvidia-smi.txt" 2>&1 || true

# (a) device pipeline, (b) synthetic device tensors, (c) PIL loader: images/s per method at 224 px, batch 256.
for method in IR MoCo CMC LA; do
  run "throughput_$method" 70 benchmarks/throughput.py --method "$method"
done
# MoCo's 8 BatchNorm groups channels-last (copy-free since issue 31) against throughput_MoCo's NCHW, which
# channels_last: auto runs with groups: the figure that decides auto for grouped cells (resolve_precision).
run throughput_MoCo_channels_last 60 benchmarks/throughput.py --method MoCo --channels-last on --feeds synthetic
# Ring's step-time ratios at paper scale (queue 65,536; banks 50,000 and 1.28M), selection cost, memory.
RING_BENCH_STEPS=${RING_BENCH_STEPS:-10} run ring_selection 80 benchmarks/ring_selection.py
# ImageNet: PIL decoding in the workers vs batched decode_jpeg on the device.
run jpeg_decode 60 benchmarks/jpeg_decode.py
# torch.compile of the encoder (compile: auto turns it on for CUDA): the device-tensor rate of every method.
# Compilation takes most of each limit; inductor's on-disk cache shortens the later ones (one ResNet-18).
for method in MoCo IR CMC LA; do
  run "throughput_${method}_compile" 90 benchmarks/throughput.py --method "$method" --compile --feeds synthetic
done
run throughput_MoCo_compile_channels_last 90 benchmarks/throughput.py --method MoCo --compile --channels-last on \
  --feeds synthetic

(IFS=,; echo "{\"seconds\": $((SECONDS - start)), \"budget_s\": $budget, \"runs\": [${summary[*]}]}") > "$OUT/suite.json"
echo "suite: done in $((SECONDS - start))s; results:"
ls -1A "$OUT" | grep "json$"
