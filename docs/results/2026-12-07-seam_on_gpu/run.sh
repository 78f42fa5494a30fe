#!/bin/bash
# bash scripts/main.sh and, started the same second on the same GPU, the three 20-step runs of
# docs/results/2026-11-29-redesign_paths (the two judged runs with the judge-failure watch off); from the project root.
#   PYTHON=python3 MODEL=<SmolLM2-135M-Instruct folder> bash docs/results/2026-12-07-seam_on_gpu/run.sh
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 20
export VLLM_USE_FLASHINFER_SAMPLER=0
"${PYTHON:-python3}" -m scripts.bytecode --compile
bash scripts/main.sh > main.log 2>&1 &
main=$!
OUT_ROOT=${OUT_ROOT:-/tmp/pw} bash docs/results/2026-11-29-redesign_paths/run.sh verl_judge.fail_fast.enable=false \
  > trio.log 2>&1 &
trio=$!
wait $main; echo "main.sh exit $?"
wait $trio; echo "three runs: exit $?"
