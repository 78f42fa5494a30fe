#!/usr/bin/env bash
# Did a recipe learn? Evaluate the start model, train, merge, evaluate the trained model, compare.
#
#   RECIPE=judge_pairwise STEPS=50 bash scripts/learn_eval.sh [Hydra overrides for training]
#   RECIPE=gsm8k_rule     STEPS=50 bash scripts/learn_eval.sh
#
# Stages (each prints its output; a stage whose output exists is skipped, so a rerun resumes):
#   1 data    the recipe's default data (recipes/$RECIPE/run.sh --build-data) unless TRAIN_FILES/VAL_FILES
#   2 before  evaluate MODEL on the validation file          -> RUN_DIR/eval_before
#   3 train   recipes/$RECIPE/run.sh for STEPS steps (checkpoint at the last step) -> RUN_DIR/checkpoints
#   4 merge   scripts/merge_ckpt.sh (verl.model_merger)       -> RUN_DIR/hf
#   5 after   the same evaluation of RUN_DIR/hf              -> RUN_DIR/eval_after
#   6 report  RUN_DIR/compare.md (scripts/compare_evals.py) and RUN_DIR/curves (scripts/plot_metrics.py)
# Evaluation: judge_pairwise / judge_pointwise -> scripts/eval_judge.py (judge_pairwise: EVAL_PAIRS
# pairs in both orders, so the flip rate is measured); gsm8k_* -> scripts/eval_gsm8k.py (strict and
# flexible accuracy, first EVAL_LIMIT questions). Greedy, EVAL_MAX_TOKENS tokens, vLLM offline on this
# machine's GPU (EVAL_BACKEND=hf: transformers, e.g. on a CPU).
# Knobs: RECIPE (required), STEPS (50), RUN_DIR (outputs/learn/$RECIPE), EVAL_PAIRS (500),
# EVAL_LIMIT (all), EVAL_MAX_TOKENS (the recipe's MAX_RESPONSE_LENGTH, else 512), EVAL_GPU_MEM_UTIL
# (0.3), EVAL_KV_CACHE_GB (unset: vLLM profiles memory; set it when other jobs share the GPU),
# EVAL_BACKEND (vllm | hf), EVAL_OVERLAP (0; 1: stage 2 runs in the background while stage 3 trains,
# saving its minutes; needs EVAL_KV_CACHE_GB with vLLM, its log is RUN_DIR/eval_before.log, and
# training waits for it before merging), PYTHON, MODEL, and every knob of the recipe (see its README).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/scripts/lib.sh"
usage_if_help "$0" "$@"
RECIPE=${RECIPE:?set RECIPE (judge_pairwise, judge_pointwise, gsm8k_rule, gsm8k_local_judge, gsm8k_api_judge)}
[ -f "$ROOT/recipes/$RECIPE/run.sh" ] && [ "$RECIPE" != judge_to_reward ] || { echo "RECIPE=$RECIPE: not a single-run recipe under recipes/" >&2; exit 2; }
STEPS=${STEPS:-50}
RUN_DIR=$(mkdir -p "${RUN_DIR:-$ROOT/outputs/learn/$RECIPE}" && cd "${RUN_DIR:-$ROOT/outputs/learn/$RECIPE}" && pwd)
EVAL_PAIRS=${EVAL_PAIRS:-500}
EVAL_LIMIT=${EVAL_LIMIT:-}
EVAL_MAX_TOKENS=${EVAL_MAX_TOKENS:-${MAX_RESPONSE_LENGTH:-512}}
EVAL_GPU_MEM_UTIL=${EVAL_GPU_MEM_UTIL:-0.3}
EVAL_BACKEND=${EVAL_BACKEND:-vllm}
EVAL_KV_CACHE_GB=${EVAL_KV_CACHE_GB:-}
EVAL_OVERLAP=${EVAL_OVERLAP:-0}
case $EVAL_OVERLAP in 0|1) ;; *) echo "EVAL_OVERLAP=$EVAL_OVERLAP: want 0 or 1" >&2; exit 2 ;; esac
if [ "$EVAL_OVERLAP" = 1 ] && [ "$EVAL_BACKEND" = vllm ] && [ -z "$EVAL_KV_CACHE_GB" ]; then
  echo "EVAL_OVERLAP=1 needs EVAL_KV_CACHE_GB: vLLM cannot size its KV cache by profiling a GPU that training is using" >&2
  exit 2
fi
say() { echo "[learn_eval $(date +%H:%M:%S)] $*"; }
export PYTHON=${PYTHON:-$(bash "$ROOT/scripts/launch.sh" --print-python)}
export MODEL=${MODEL:-$("$PYTHON" "$ROOT/scripts/materialize_model.py" | tail -n 1)}

say "stage 1/6: data"
if [ -z "${TRAIN_FILES:-}" ] || [ -z "${VAL_FILES:-}" ]; then
  out=$(bash "$ROOT/recipes/$RECIPE/run.sh" --build-data)
  export TRAIN_FILES=${TRAIN_FILES:-$(printf '%s\n' "$out" | sed -n 's/^train=//p')}
  export VAL_FILES=${VAL_FILES:-$(printf '%s\n' "$out" | sed -n 's/^val=//p')}
fi
say "stage 1 output: train $TRAIN_FILES , eval $VAL_FILES"

evaluate() {  # $1 = model folder, $2 = output folder
  if [ -f "$2/report.json" ]; then say "skipped: $2/report.json exists"; return 0; fi
  local cmd
  case $RECIPE in
    judge_pairwise) cmd=("$ROOT/scripts/eval_judge.py" --data "$VAL_FILES" --pairs "$EVAL_PAIRS" --seed 0) ;;
    judge_pointwise) cmd=("$ROOT/scripts/eval_judge.py" --data "$VAL_FILES" ${EVAL_LIMIT:+--limit "$EVAL_LIMIT"}) ;;
    *) cmd=("$ROOT/scripts/eval_gsm8k.py" --data "$VAL_FILES" ${EVAL_LIMIT:+--limit "$EVAL_LIMIT"}) ;;
  esac
  if [ "$EVAL_BACKEND" = hf ]; then cmd+=(--hf-offline "$1")
  else cmd+=(--vllm-offline "$1" --gpu-memory-utilization "$EVAL_GPU_MEM_UTIL" ${EVAL_KV_CACHE_GB:+--kv-cache-gb "$EVAL_KV_CACHE_GB"}); fi
  cmd+=(--max-tokens "$EVAL_MAX_TOKENS" --temperature 0 --out "$2.tmp" --no-progress)
  say "command: $PYTHON ${cmd[*]}"
  if is_dry; then return 0; fi
  rm -rf "$2.tmp"
  "$PYTHON" "${cmd[@]}"
  rm -rf "$2"; mv "$2.tmp" "$2"
  say "output: $2"
}
say "stage 2/6: evaluate the start model $MODEL"
before_pid=
if [ "$EVAL_OVERLAP" = 1 ] && [ ! -f "$RUN_DIR/eval_before/report.json" ]; then
  evaluate "$MODEL" "$RUN_DIR/eval_before" > "$RUN_DIR/eval_before.log" 2>&1 &
  before_pid=$!
  trap '[ -n "$before_pid" ] && kill "$before_pid" 2>/dev/null' EXIT
  say "stage 2 runs in the background during training (EVAL_OVERLAP=1), log: $RUN_DIR/eval_before.log"
else
  evaluate "$MODEL" "$RUN_DIR/eval_before"
fi

say "stage 3/6: train (recipes/$RECIPE, $STEPS steps)"
if [ -f "$RUN_DIR/.trained" ]; then
  say "skipped: $RUN_DIR/.trained exists"
else
  TOTAL_STEPS=$STEPS SAVE_FREQ=$STEPS CKPT_DIR=$RUN_DIR/checkpoints OUTPUT_DIR=$RUN_DIR \
  METRICS_FILE=$RUN_DIR/metrics.jsonl EXPERIMENT=${EXPERIMENT:-learn-$RECIPE} \
    bash "$ROOT/recipes/$RECIPE/run.sh" "$@"
  is_dry || touch "$RUN_DIR/.trained"
fi
say "stage 3 output: $RUN_DIR/checkpoints, metrics $RUN_DIR/metrics.jsonl"
if [ -n "$before_pid" ]; then
  say "waiting for stage 2 (background)"
  if ! wait "$before_pid"; then
    before_pid=; say "ERROR: stage 2 (evaluate the start model) failed:"; tail -n 20 "$RUN_DIR/eval_before.log" >&2; exit 1
  fi
  before_pid=; cat "$RUN_DIR/eval_before.log"
fi

say "stage 4/6: merge (verl.model_merger)"
bash "$ROOT/scripts/merge_ckpt.sh" "$RUN_DIR/checkpoints" "$RUN_DIR/hf"

say "stage 5/6: evaluate the trained model $RUN_DIR/hf"
evaluate "$RUN_DIR/hf" "$RUN_DIR/eval_after"

say "stage 6/6: report"
if is_dry; then say "DRY_RUN: no report"; exit 0; fi
"$PYTHON" "$ROOT/scripts/compare_evals.py" "$RUN_DIR/eval_before" "$RUN_DIR/eval_after" --out "$RUN_DIR/compare.md"
"$PYTHON" "$ROOT/scripts/plot_metrics.py" "$RUN_DIR/metrics.jsonl" --out "$RUN_DIR/curves" || say "warning: plot_metrics failed"
"$PYTHON" "$ROOT/scripts/summarize_run.py" "$RUN_DIR/metrics.jsonl" > "$RUN_DIR/summary.md" || true
say "done: $RUN_DIR/compare.md, $RUN_DIR/curves, $RUN_DIR/summary.md"
