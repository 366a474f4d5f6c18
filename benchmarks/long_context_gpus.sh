#!/usr/bin/env bash
# The long-context benchmark spread over the GPUs of one machine: the data and baseline first, then one held-out
# genome per GPU (its lengths and seeds, JOBS runs at once) and, on the last GPU, the speed and memory section;
# then one more pass over the same --work folder reads every scored run back into one table.
#   bash benchmarks/long_context_gpus.sh OUT_PREFIX [SHARED_DATA] [extra long_context.py options...]
# e.g. bash benchmarks/long_context_gpus.sh results/long_context_h100x4 ../shared/data --max-minutes 3
set -euo pipefail
OUT=${1:?usage: long_context_gpus.sh OUT_PREFIX [SHARED_DATA] [options]}
SHARED=${2:-$(dirname "$0")/../../shared/data}
shift $(( $# > 1 ? 2 : 1 ))
PRESET=${PRESET:-small}         # the quality runs' preset
SPEED_PRESET=${SPEED_PRESET:-base}
JOBS=${JOBS:-3}
WORK=${WORK:-$(mktemp -d)}
GENOMES=(ECOLI_K12 BACILLUS CJEJUNI_2)
GPUS=$(nvidia-smi -L | wc -l)
BENCH=(python3 "$(dirname "$0")/long_context.py" --device cuda --shared "$SHARED" --data-dir "$WORK/data")

"${BENCH[@]}" --skip-train "$@" --out "${OUT}_data" > "${OUT}_data.log" 2>&1
pids=()
for i in "${!GENOMES[@]}"; do
  CUDA_VISIBLE_DEVICES=$(( i % GPUS )) "${BENCH[@]}" --preset "$PRESET" --jobs "$JOBS" --held-out "${GENOMES[$i]}" \
    --work "$WORK/runs" "$@" --out "${OUT}_${GENOMES[$i]}" > "${OUT}_${GENOMES[$i]}.log" 2>&1 &
  pids+=($!)
done
CUDA_VISIBLE_DEVICES=$(( GPUS - 1 )) "${BENCH[@]}" --preset "$SPEED_PRESET" --skip-train --speed \
  --work "$WORK/speed" "$@" --out "${OUT}_speed" > "${OUT}_speed.log" 2>&1 || echo "speed section failed"
for pid in "${pids[@]}"; do wait "$pid" || echo "a held-out genome's runs failed (see its log)"; done
"${BENCH[@]}" --preset "$PRESET" --work "$WORK/runs" "$@" --out "$OUT" > "$OUT.log" 2>&1
