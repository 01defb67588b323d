#!/usr/bin/env bash
# Every GPU benchmark of the project in one run, each in its own process, all results back in three files.
#
#   OUT=/path/to/empty/dir bash benchmarks/gpu_suite.sh [--quick]      # from anywhere in the repository
#
# Needs only python3 with torch, torchvision, numpy, pillow and pyyaml (it checks them first and names
# each missing one on its own line): no dataset files (the data is generated), no kornia
# (benchmarks/common.py stands in for CMC's Lab conversion), no internet.  Leaves exactly three files
# under $OUT (the lent GPU machines return at most 8 files from a run):
#   results.tar.gz  every result <benchmark>-<device>.json (each naming the device, torch, torchvision,
#                   CUDA and cuDNN versions), logs/<benchmark>.log, logs/nvidia-smi.txt, suite.json
#                   (what ran, its exit status and seconds);
#   summary.json, summary.md  every target of issue 31 beside its measured value and pass/fail.
# Unpack the results into ring/resources/figures/ and commit them (`ring estimate`
# then prices grids from them):  python benchmarks/suite_summary.py unpack $OUT/results.tar.gz
#
# Modes (budgets for one H100/H200 with 16 cores): full (default, <= 9 minutes): every method eager
# (device pipeline, device tensors, PIL loader) and compiled (device tensors and device pipeline),
# Ring's step-time ratios (queue 65,536; banks 50,000 and 1.28M), the JPEG path, one step under
# torch.cuda.set_sync_debug_mode("error"), the GPU decoder's checks (its pixels against PIL's within a stated
# bound, its handover under PyTorch's CUDA sanitizer).  --quick (<= 4 minutes): MoCo and IR compiled (their device
# pipeline and their prepared-store path with them, decoded by the loader's workers and by the GPU decoder), the JPEG
# path, the store's loader, IRing at the 1.28M bank, the sync step, the GPU decoder's checks.
# Compilation: the compiled methods are compiled first, side by side, into one inductor cache in a
# scratch folder (on a fresh H200: MoCo 112 s, IR, CMC and LA 29-43 s, all four together), and nothing
# is timed until every warm-up is done: warm-ups that ran beside the eager benchmarks halved MoCo's
# eager figure (2,951 against 6,442 images/s alone).  Each timed compiled run then starts from that
# cache (each result records its first step's seconds, compilation included: first_step_s).
#
# Knobs: PYTHON (default python3); RING_SUITE_BUDGET_S (default 540 full, 240 quick: later benchmarks
# are skipped when the budget is spent); RING_SUITE_TINY=1 runs every benchmark at its --tiny size
# (the CPU smoke test); RING_SUITE_ONLY="name ..." runs only those benchmarks (the others are
# recorded as not selected); RING_SUITE_TIMEOUT_S replaces every benchmark's own time limit (a
# loaded CPU); RING_BENCH_WARMUP / RING_BENCH_STEPS override the warm-up and timed steps of every
# measurement.
set -u
mode=full
case "${1:-}" in
  --quick) mode=quick ;;
  "") ;;
  *) echo "gpu_suite.sh: unknown argument '$1'; the only option is --quick." >&2; exit 2 ;;
esac
: "${OUT:?set OUT to the folder that receives the results}"
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
cd "$(dirname "$0")/.."  # the repository root, wherever it was started from
scratch=$(mktemp -d "${TMPDIR:-/tmp}/ring-suite.XXXXXX")  # outside $OUT: only the three files come back
RAW=$scratch/results
mkdir -p "$RAW/logs" "$scratch/warm"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 RING_BENCH_RESULTS="$RAW"
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-$scratch/inductor}
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-$scratch/triton}
PY=${PYTHON:-python3}
if [ "$mode" = quick ]; then budget=${RING_SUITE_BUDGET_S:-240}; else budget=${RING_SUITE_BUDGET_S:-540}; fi
tiny=()
[ "${RING_SUITE_TINY:-0}" = 1 ] && tiny=(--tiny)
start=$SECONDS
summary=()
declare -A warm_pid=()

selected() { [ -z "${RING_SUITE_ONLY:-}" ] || [[ " $RING_SUITE_ONLY " == *" $1 "* ]]; }

record() {  # record NAME RC SECONDS SKIPPED_REASON
  local skipped=null
  [ -n "$4" ] && skipped="\"$4\""
  summary+=("{\"name\": \"$1\", \"rc\": $2, \"seconds\": $3, \"skipped\": $skipped}")
}

finish() {  # suite.json, then the archive and the summary under $OUT; the scratch folder goes
  (IFS=,; echo "{\"mode\": \"$mode\", \"seconds\": $((SECONDS - start)), \"budget_s\": $budget," \
    "\"runs\": [${summary[*]}]}") > "$RAW/suite.json"
  for pid in "${warm_pid[@]}"; do kill "$pid" 2>/dev/null; done
  wait 2>/dev/null
  "$PY" benchmarks/suite_summary.py finish "$RAW" "$OUT" --mode "$mode"
  local rc=$?
  rm -rf "$scratch"
  echo "suite: done in $((SECONDS - start))s; under $OUT:"
  ls -1A "$OUT"
  return $rc
}

run() {  # run NAME LIMIT_S ARGS...: one benchmark in its own process, capped by its limit and the budget
  local name=$1 limit=${RING_SUITE_TIMEOUT_S:-$2} left rc t0
  shift 2
  if ! selected "$name"; then record "$name" null 0 "not in RING_SUITE_ONLY"; return; fi
  left=$((budget - (SECONDS - start)))
  if ((left < 15)); then
    echo "== $name: skipped, the suite's ${budget}s budget is spent"
    record "$name" null 0 "budget spent"
    return
  fi
  ((limit > left)) && limit=$left
  echo "== $name (limit ${limit}s, $((SECONDS - start))s into the suite)"
  t0=$SECONDS
  # Progress lines only on the terminal (the result JSON is in the log and in its file).
  timeout -k 5 "$limit" "$PY" "$@" "${tiny[@]}" 2>&1 | tee "$RAW/logs/$name.log" | grep -v '^[ {}"\[]'
  rc=${PIPESTATUS[0]}
  echo "== $name: exit $rc after $((SECONDS - t0))s"
  record "$name" "$rc" $((SECONDS - t0)) ""
}

warm() {  # warm METHOD...: compile each one's step in the background into the shared inductor cache
  local m
  for m; do
    selected "throughput_${m}_compile" || continue
    RING_BENCH_RESULTS="$scratch/warm" RING_BENCH_WARMUP=1 RING_BENCH_STEPS=1 nice -n 19 \
      timeout -k 5 "$budget" "$PY" benchmarks/throughput.py --method "$m" --compile --feeds synthetic "${tiny[@]}" \
      > "$RAW/logs/warm_$m.log" 2>&1 &
    warm_pid[$m]=$!
  done
}

warmed() {  # every warm-up done: nothing is timed while they compile and step on the GPU
  local pid
  for pid in "${warm_pid[@]}"; do wait "$pid" 2>/dev/null; done
  echo "suite: compiled warm-ups done after $((SECONDS - start))s"
}

compiled() {  # compiled METHOD FEEDS: the timed compiled run, once its warm-up has filled the cache
  local m=$1
  [ -n "${warm_pid[$m]:-}" ] && wait "${warm_pid[$m]}" 2>/dev/null
  run "throughput_${m}_compile" 150 benchmarks/throughput.py --method "$m" --compile --feeds "$2"
}

gpu_decoder_checks() {  # store_decode: gpu's correctness on this machine, before any of its speed is worth timing
  # nvJPEG's pixels against PIL's on a generated 256-px jpeg95 store (six batches of 256, reads delayed behind the
  # decoder), held to two compliant decoders' bound; then the handover under TORCH_CUDA_SANITIZER, as shipped (no
  # race) and with a release event recorded on the wrong stream (caught).
  run decode_pixels 60 benchmarks/decode_pixels.py
  run stream_sanitizer 90 benchmarks/stream_sanitizer.py
}

if ! "$PY" benchmarks/suite_summary.py check; then
  echo "suite: install the missing packages above and rerun; nothing was measured." >&2
  finish
  exit 1
fi
"$PY" - <<'PY' || true
import torch, torchvision
print("suite: torch", torch.__version__, "torchvision", torchvision.__version__, "cuda", torch.version.cuda,
      "device", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu", flush=True)
PY
nvidia-smi > "$RAW/logs/nvidia-smi.txt" 2>&1 || true
echo "suite: $mode mode, ${budget}s budget"

if [ "$mode" = quick ]; then
  warm MoCo IR
  warmed
  run sync_step 60 benchmarks/sync_step.py --methods MoCo IR
  gpu_decoder_checks
  run jpeg_decode 60 benchmarks/jpeg_decode.py
  # ImageNet's prepared store (issue 39): per core, per loader, and through the compiled views of both methods.
  run store_loader 120 benchmarks/store_loader.py
  RING_BENCH_STEPS=${RING_BENCH_STEPS:-10} run ring_selection 50 benchmarks/ring_selection.py --quick
  # store: the loader's workers decode the jpeg95 records; store_gpu: the GPU decoder thread (store_decode: gpu).
  compiled MoCo synthetic,device,store,store_gpu
  compiled IR synthetic,device,store,store_gpu
else
  warm MoCo IR CMC LA
  warmed
  # (a) device pipeline, (b) synthetic device tensors, (c) PIL loader: images/s per method at 224 px, batch 256.
  for method in IR MoCo CMC LA; do
    run "throughput_$method" 60 benchmarks/throughput.py --method "$method"
  done
  # MoCo's 8 BatchNorm groups channels-last (copy-free since issue 31) against throughput_MoCo's NCHW, which
  # channels_last: auto runs with groups: the figure that decides auto for grouped cells (resolve_precision).
  run throughput_MoCo_channels_last 45 benchmarks/throughput.py --method MoCo --channels-last on --feeds synthetic
  # Ring's step-time ratios at paper scale (queue 65,536; banks 50,000 and 1.28M), selection cost, memory.
  RING_BENCH_STEPS=${RING_BENCH_STEPS:-10} run ring_selection 70 benchmarks/ring_selection.py
  # ImageNet: PIL decoding in the workers vs batched decode_jpeg on the device.
  run jpeg_decode 50 benchmarks/jpeg_decode.py
  run store_loader 120 benchmarks/store_loader.py
  run sync_step 40 benchmarks/sync_step.py --methods MoCo IR
  gpu_decoder_checks
  # torch.compile (compile: auto turns it on for CUDA): device tensors and the device pipeline of every method.
  for method in MoCo IR CMC LA; do
    compiled "$method" synthetic,device,store,store_gpu
  done
fi
finish
