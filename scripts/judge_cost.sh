#!/usr/bin/env bash
# Judge cost: what a local LLM judge adds to a GRPO step. Runs recipes/gsm8k_rule and
# recipes/gsm8k_local_judge one after the other with identical settings on this machine, then each
# VARIANT (the local judge with other settings), and writes the median stage times side by side
# with their ratio to the rule run (python -m scripts.report.summarize_run --ratio; the first step is left out).
#
#   STEPS=8 bash scripts/judge_cost.sh
#   VARIANTS="tok128:JUDGE_MAX_TOKENS=128 hybrid:JUDGE_MODE=hybrid,JUDGE_MAX_TOKENS=128" bash scripts/judge_cost.sh
#
# Shared settings (each one overridable from the environment): USE_V1=0 (a colocated judge runs on
# verl's legacy trainer, so the rule run does too), GPU_MEM_UTIL=0.3, SAVE_FREQ=-1, TEST_FREQ=-1,
# RESUME_MODE=disable; and every other recipe knob as you set it. Extra arguments are Hydra overrides
# given to every run. RUNS limits which runs are made (default "rule local" + the variant names).
# Output: COST_DIR (outputs/judge_cost)/<run>/{run.log,metrics.jsonl} and COST_DIR/cost.md.
# Exit status: 0 when every run exited 0, else 1 (the table still holds the runs that finished).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/scripts/lib.sh"
usage_if_help "$0" "$@"
STEPS=${STEPS:-8}
COST_DIR=${COST_DIR:-$ROOT/outputs/judge_cost}
VARIANTS=${VARIANTS:-}
export USE_V1=${USE_V1:-0} GPU_MEM_UTIL=${GPU_MEM_UTIL:-0.3} SAVE_FREQ=${SAVE_FREQ:--1} TEST_FREQ=${TEST_FREQ:--1}
export RESUME_MODE=${RESUME_MODE:-disable} TOTAL_STEPS=$STEPS
export PYTHON=${PYTHON:-$(bash "$ROOT/scripts/launch.sh" --print-python)}
say() { echo "[judge_cost $(date +%H:%M:%S)] $*"; }
names=(rule local); recipes=(gsm8k_rule gsm8k_local_judge); settings=("" "")
for v in $VARIANTS; do
  name=${v%%:*}; set_=${v#*:}
  [[ "$v" == *:* && "$name" =~ ^[A-Za-z0-9_.-]+$ && "$set_" =~ ^[A-Z_][A-Z0-9_]*= ]] || {
    echo "VARIANTS: bad entry '$v' (want name:VAR=value[,VAR=value...])" >&2; exit 2; }
  names+=("$name"); recipes+=(gsm8k_local_judge); settings+=("$set_")
done
RUNS=${RUNS:-${names[*]}}
mkdir -p "$COST_DIR"
files=(); labels=(); fail=0
for i in "${!names[@]}"; do
  name=${names[$i]}
  [[ " $RUNS " == *" $name "* ]] || continue
  out=$COST_DIR/$name; mkdir -p "$out"
  env_=(); IFS=, read -ra kv <<< "${settings[$i]}"; for x in "${kv[@]}"; do [ -n "$x" ] && env_+=("$x"); done
  say "run $name: recipes/${recipes[$i]} ${env_[*]:-} ($STEPS steps) -> $out/run.log"
  t0=$(date +%s)
  env "${env_[@]}" OUTPUT_DIR="$out" METRICS_FILE="$out/metrics.jsonl" CKPT_DIR="$out/checkpoints" \
    EXPERIMENT="judge-cost-$name" bash "$ROOT/recipes/${recipes[$i]}/run.sh" "$@" > "$out/run.log" 2>&1
  rc=$?
  say "run $name: exit $rc in $(( $(date +%s) - t0 )) s"
  [ "$rc" = 0 ] || { fail=1; tail -n 20 "$out/run.log"; }
  [ -s "$out/metrics.jsonl" ] && { files+=("$out/metrics.jsonl"); labels+=("$name"); }
done
if [ "${#files[@]}" -gt 0 ] && ! is_dry; then
  { echo "# Judge cost ($(date -u +%Y-%m-%d), $STEPS steps, medians after step 1)"; echo
    echo "settings: USE_V1=$USE_V1 GPU_MEM_UTIL=$GPU_MEM_UTIL VARIANTS=${VARIANTS:-none} overrides: ${*:-none}"; echo
    PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m scripts.report.summarize_run "${files[@]}" \
      --labels "${labels[@]}" --ratio
  } > "$COST_DIR/cost.md"
  cat "$COST_DIR/cost.md"
fi
exit $fail
