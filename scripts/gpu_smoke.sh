#!/usr/bin/env bash
# GPU smoke test: every recipe for a few steps on one GPU, then checks.
#
#   bash scripts/gpu_smoke.sh                       # all recipes, 3 steps each
#   RECIPES="gsm8k_rule gsm8k_local_judge" STEPS=8 bash scripts/gpu_smoke.sh
#
# For each recipe: the run exits 0, its metrics JSONL has critic/score/mean and timing_s/step,
# with TEST_FREQ>0 (default: STEPS) a validation ran and its val-* metrics hold the reward's own keys
# (format_ok; judge_error, judge_parse_fail, rule_score for the LLM-judge reward), and
# checkpoints exist (judge recipes; judge_to_reward also the merged HF judge folder).
# gsm8k_api_judge is pointed at a vLLM OpenAI server of the judge model started here on the same GPU.
# Knobs: MODEL (default: materialised SmolLM2), GSM8K_DIR (local GSM8K jsonl; unset = HF hub),
# PYTHON (existing interpreter, e.g. python3 with verl+vLLM), SMOKE_DIR (outputs), STEPS,
# API_PORT (8011), API_GPU_MEM_UTIL (0.15), API_SERVER_ARGS (more vLLM server flags). Extra args are
# Hydra overrides passed to every recipe.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/scripts/lib.sh"
usage_if_help "$0" "$@"
RECIPES=${RECIPES:-"gsm8k_rule judge_pointwise judge_pairwise gsm8k_local_judge gsm8k_api_judge judge_to_reward"}
STEPS=${STEPS:-3}
SMOKE_DIR=${SMOKE_DIR:-$ROOT/outputs/gpu_smoke}
API_PORT=${API_PORT:-8011}
RECIPES_DIR=${RECIPES_DIR:-$ROOT/recipes}  # tests point it at stand-in recipes
export PYTHON=${PYTHON:-$(bash "$ROOT/scripts/setup_env.sh" gpu | tail -n 1)}
export MODEL=${MODEL:-$("$PYTHON" -m data_prep.model | tail -n 1)}
export TEST_FREQ=${TEST_FREQ:-$STEPS} VAL_MAX_SAMPLES=${VAL_MAX_SAMPLES:-32} SAVE_FREQ=${SAVE_FREQ:-$STEPS}
export DATA_DIR=${DATA_DIR:-$SMOKE_DIR/data}
mkdir -p "$SMOKE_DIR"
summary=$SMOKE_DIR/summary.md
echo "| recipe | exit | wall s | steps | checks |" > "$summary"; echo "|---|---|---:|---:|---|" >> "$summary"
fail=0

start_api_server() {
  "$PYTHON" -m vllm.entrypoints.openai.api_server --model "$MODEL" --served-model-name judge \
    --host 127.0.0.1 --port "$API_PORT" --gpu-memory-utilization "${API_GPU_MEM_UTIL:-0.15}" --enforce-eager \
    --max-model-len 2048 ${API_SERVER_ARGS:-} > "$SMOKE_DIR/api_server.log" 2>&1 &
  API_PID=$!
  for _ in $(seq 1 120); do
    curl -sf "http://127.0.0.1:$API_PORT/v1/models" >/dev/null 2>&1 && return 0
    kill -0 $API_PID 2>/dev/null || { echo "api server died"; tail -20 "$SMOKE_DIR/api_server.log"; return 1; }
    sleep 2
  done
  return 1
}

for r in $RECIPES; do
  out=$SMOKE_DIR/$r; mkdir -p "$out"
  export OUTPUT_DIR=$out METRICS_FILE=$out/metrics.jsonl CKPT_DIR=$out/checkpoints EXPERIMENT=smoke-$r
  extra_env=()
  case $r in
    gsm8k_api_judge)
      start_api_server || { echo "| $r | server failed | | | |" >> "$summary"; fail=1; continue; }
      extra_env=(JUDGE_BASE_URL=http://127.0.0.1:$API_PORT/v1 JUDGE_MODEL_NAME=judge JUDGE_API_KEY_ENV=SMOKE_NO_KEY) ;;
    judge_to_reward)
      extra_env=(PIPELINE_DIR=$out JUDGE_STEPS=$STEPS POLICY_STEPS=$STEPS JUDGE_SAVE_FREQ=$STEPS) ;;
  esac
  t0=$(date +%s)
  env "${extra_env[@]}" TOTAL_STEPS=$STEPS bash "$RECIPES_DIR/$r/run.sh" "$@" > "$out/run.log" 2>&1
  rc=$?
  wall=$(( $(date +%s) - t0 ))
  [ -n "${API_PID:-}" ] && { kill $API_PID 2>/dev/null; wait $API_PID 2>/dev/null; API_PID=; }
  checks=()
  case $r in
    judge_to_reward) mfiles=("$out/judge/metrics.jsonl" "$out/policy/metrics.jsonl") ;;
    *) mfiles=("$out/metrics.jsonl") ;;
  esac
  for m in "${mfiles[@]}"; do
    req=(critic/score/mean timing_s/step)
    if [ "$TEST_FREQ" -gt 0 ] 2>/dev/null; then  # verl 0.9.1 logs reward extra keys in validation metrics only
      case $r:$m in
        gsm8k_api_judge:*|gsm8k_local_judge:*|judge_to_reward:*/policy/*) req+=(val- /judge_error/ /judge_parse_fail/ /rule_score/) ;;
        *) req+=(val- /format_ok/) ;;
      esac
    fi
    if PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m scripts.report.summarize_run "$m" --require "${req[@]}" \
        > "$m.summary.md" 2>&1; then
      checks+=("metrics ok")
    else checks+=("METRICS MISSING in $m"); [ "$rc" = 0 ] && rc=9; fi
  done
  case $r in
    judge_pointwise|judge_pairwise) ls -d "$out"/checkpoints/global_step_* >/dev/null 2>&1 && checks+=("ckpt ok") || { checks+=("NO CKPT"); [ "$rc" = 0 ] && rc=8; } ;;
    judge_to_reward) [ -f "$out/judge_hf/config.json" ] && checks+=("merged judge ok") || { checks+=("NO MERGED JUDGE"); [ "$rc" = 0 ] && rc=8; } ;;
  esac
  steps=$(grep -c timing_s/step "${mfiles[-1]}" 2>/dev/null || echo 0)
  echo "| $r | $rc | $wall | $steps | ${checks[*]} |" >> "$summary"
  [ "$rc" = 0 ] || { fail=1; tail -30 "$out/run.log"; }
done
cat "$summary"
exit $fail
