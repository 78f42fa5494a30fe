#!/usr/bin/env bash
# GPU smoke test: every recipe for a few steps on one GPU, then checks.
#
#   bash scripts/gpu_smoke.sh                       # all recipes, 3 steps each
#   RECIPES="gsm8k_rule gsm8k_local_judge" STEPS=8 bash scripts/gpu_smoke.sh
#   bash scripts/gpu_smoke.sh trainer.test_freq=-1  # no validation (extra args: Hydra overrides)
#
# Each recipe runs through its recipes/<r>/run.sh with these Hydra overrides, then the extra
# arguments (an argument for the same key wins): trainer.total_training_steps=STEPS
# trainer.test_freq=STEPS data.val_max_samples=32 trainer.save_freq=STEPS
# trainer.default_local_dir=SMOKE_DIR/<r>/checkpoints trainer.experiment_name=smoke-<r>, and OUTPUT_DIR=SMOKE_DIR/<r>.
# judge_to_reward runs the pipeline: --out SMOKE_DIR/judge_to_reward --grpo-steps STEPS --policy-steps STEPS,
# trainer.test_freq, data.val_max_samples and the extra arguments for both the judge GRPO stage and
# (as --policy-override) the policy stage.
# Checks: the run exits 0; its metrics JSONL (judge_to_reward: metrics.jsonl and policy_metrics.jsonl) has
# critic/score/mean, timing_s/step and the reward's per-step keys reward/<key>/mean (format_ok; the LLM-judge
# reward: judge_error, judge_parse_fail, rule_score and judge_health/*); with trainer.test_freq > 0 also a
# validation (val-*) holding the same reward keys; judge_pointwise/judge_pairwise wrote a checkpoint and
# judge_to_reward the merged judge (hf/config.json). A failed check sets the exit code shown: 9 (metrics), 8
# (checkpoint / merged judge). SMOKE_DIR/summary.md: | recipe | exit | wall s | steps | checks |.
# gsm8k_api_judge is pointed at a vLLM OpenAI server of the judge model started here on the same GPU
# (JUDGE_BASE_URL, reward_kwargs model=judge and api_key_env=SMOKE_NO_KEY).
# DRY_RUN=1: every recipe's configuration is checked on CPU by the launcher (no server, no checks).
# Knobs of this script (not passed on): RECIPES, STEPS (3), SMOKE_DIR (outputs/gpu_smoke), API_PORT (8011),
# API_GPU_MEM_UTIL (0.15), API_SERVER_ARGS (more vLLM server flags). Launcher variables are passed as set:
# MODEL (default: the materialised SmolLM2, also served to gsm8k_api_judge), PYTHON (e.g. python3 with
# verl+vLLM; default scripts/launch.sh --print-python), GSM8K_DIR, DATA_DIR (default SMOKE_DIR/data), ...
# Exit status: 0 when every recipe passed, 1 otherwise, 2 when a variable that looks like a knob but is none is set.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/scripts/lib.sh"
usage_if_help "$0" "$@"
RECIPES=${RECIPES:-"gsm8k_rule judge_pointwise judge_pairwise gsm8k_local_judge gsm8k_api_judge judge_to_reward"}
STEPS=${STEPS:-3}
SMOKE_DIR=${SMOKE_DIR:-$ROOT/outputs/gpu_smoke}
API_PORT=${API_PORT:-8011}
RECIPES_DIR=${RECIPES_DIR:-$ROOT/recipes}  # tests point it at stand-in recipes
export PYTHON=${PYTHON:-$(bash "$ROOT/scripts/launch.sh" --print-python)}
check_knobs gpu_smoke
export MODEL=${MODEL:-$(PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m data_prep.model | tail -n 1)}
export DATA_DIR=${DATA_DIR:-$SMOKE_DIR/data}
val_overrides=(trainer.test_freq=$STEPS data.val_max_samples=32)
later_wins "${val_overrides[@]}" "$@"; j2r_overrides=("${MERGED[@]}")  # for both judge_to_reward stages
test_freq=$(override_value trainer.test_freq "${j2r_overrides[@]}")
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
  env_=(OUTPUT_DIR="$out"); [ "$r" = judge_to_reward ] && env_=()  # the pipeline writes under --out
  own=()
  case $r in
    gsm8k_api_judge)
      is_dry || start_api_server || { echo "| $r | server failed | | | |" >> "$summary"; fail=1; continue; }
      env_+=(JUDGE_BASE_URL="http://127.0.0.1:$API_PORT/v1")
      own=(+reward.custom_reward_function.reward_kwargs.model=judge
           +reward.custom_reward_function.reward_kwargs.api_key_env=SMOKE_NO_KEY) ;;
  esac
  if [ "$r" = judge_to_reward ]; then
    # the pipeline sets the judge stage's steps, save_freq, checkpoint folder and experiment name itself
    args=(--out "$out" --grpo-steps "$STEPS" --policy-steps "$STEPS" "${j2r_overrides[@]}")
    for o in "${j2r_overrides[@]}"; do args+=("--policy-override=$o"); done
  else
    later_wins trainer.total_training_steps=$STEPS "${val_overrides[@]}" trainer.save_freq=$STEPS \
      trainer.default_local_dir="$out/checkpoints" trainer.experiment_name="smoke-$r" ${own[@]+"${own[@]}"} "$@"
    args=("${MERGED[@]}")
  fi
  t0=$(date +%s)
  env ${env_[@]+"${env_[@]}"} bash "$RECIPES_DIR/$r/run.sh" "${args[@]}" > "$out/run.log" 2>&1
  rc=$?
  wall=$(( $(date +%s) - t0 ))
  [ -n "${API_PID:-}" ] && { kill $API_PID 2>/dev/null; wait $API_PID 2>/dev/null; API_PID=; }
  if is_dry; then
    echo "| $r | $rc | $wall | 0 | dry run |" >> "$summary"
    [ "$rc" = 0 ] || { fail=1; tail -30 "$out/run.log"; }
    continue
  fi
  checks=()
  case $r in
    judge_to_reward) mfiles=("$out/metrics.jsonl" "$out/policy_metrics.jsonl") ;;
    *) mfiles=("$out/metrics.jsonl") ;;
  esac
  for m in "${mfiles[@]}"; do
    case $r:$m in
      gsm8k_api_judge:*|gsm8k_local_judge:*|judge_to_reward:*/policy_metrics.jsonl) keys=(judge_error judge_parse_fail rule_score) ;;
      *) keys=(format_ok) ;;
    esac
    req=(critic/score/mean timing_s/step)
    for k in "${keys[@]}"; do req+=("reward/$k/mean"); done
    [ "${keys[0]}" = judge_error ] && req+=(judge_health/)
    if [ "$test_freq" -gt 0 ] 2>/dev/null; then  # validation: val-aux/<data source>/<key>/mean@<n>
      req+=(val-)
      for k in "${keys[@]}"; do req+=("/$k/mean@"); done
    fi
    if PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m scripts.report.summarize_run "$m" --require "${req[@]}" \
        > "$m.summary.md" 2>&1; then
      checks+=("metrics ok")
    else checks+=("METRICS MISSING in $m"); [ "$rc" = 0 ] && rc=9; fi
  done
  case $r in
    judge_pointwise|judge_pairwise) ls -d "$out"/checkpoints/global_step_* >/dev/null 2>&1 && checks+=("ckpt ok") || { checks+=("NO CKPT"); [ "$rc" = 0 ] && rc=8; } ;;
    judge_to_reward) [ -f "$out/hf/config.json" ] && checks+=("merged judge ok") || { checks+=("NO MERGED JUDGE"); [ "$rc" = 0 ] && rc=8; } ;;
  esac
  steps=$(grep -c timing_s/step "${mfiles[-1]}" 2>/dev/null); steps=${steps:-0}
  echo "| $r | $rc | $wall | $steps | ${checks[*]} |" >> "$summary"
  [ "$rc" = 0 ] || { fail=1; tail -30 "$out/run.log"; }
done
cat "$summary"
exit $fail
