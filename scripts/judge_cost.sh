#!/usr/bin/env bash
# Judge cost: what a local LLM judge adds to a GRPO step. Runs recipes/gsm8k_rule and
# recipes/gsm8k_local_judge one after the other with identical settings on this machine, then each
# VARIANT (the local judge with more Hydra overrides), and writes the median stage times side by side
# with their ratio to the rule run (python -m scripts.report.summarize_run --ratio; the first step is left out).
#
#   STEPS=8 bash scripts/judge_cost.sh
#   VARIANTS="tok128:+reward.custom_reward_function.reward_kwargs.max_tokens=128" bash scripts/judge_cost.sh
#   VARIANTS="hybrid:+reward.custom_reward_function.reward_kwargs.mode=hybrid,+reward.custom_reward_function.reward_kwargs.max_tokens=128" \
#     bash scripts/judge_cost.sh data.train_batch_size=32
#   RULE_NAME=rule_1gpu RUNS="rule_1gpu colocated" VARIANTS="colocated:+reward.custom_reward_function.reward_kwargs.max_tokens=256" \
#     bash scripts/judge_cost.sh                     # run folders named as in issue #16 (one GPU)
#   pool=reward.reward_model.enable_resource_pool=true,reward.reward_model.n_gpus_per_node=1,reward.reward_model.nnodes=1
#   RULE_NAME=rule_pool RUNS="rule_pool pool" VARIANTS="pool:$pool,reward.reward_model.rollout.free_cache_engine=false" \
#     bash scripts/judge_cost.sh                     # two GPUs: the judge on a GPU of its own, kept awake
# scripts/bench/shapes.sh runs these two at SmolLM2-360M / 1.7B shapes with random weights.
# The placements side by side in one invocation (rule, a resident judge that is never called, colocated, server,
# route; one GPU each, or taking turns on one GPU, 40 steps): python -m scripts.bench.judge_cost (--help).
#
# Shared settings, the same Hydra overrides for every run: trainer.total_training_steps=STEPS
# actor_rollout_ref.rollout.gpu_memory_utilization=0.3 trainer.save_freq=-1 trainer.test_freq=-1
# trainer.resume_mode=disable, trainer.default_local_dir=COST_DIR/<run>/checkpoints and
# trainer.experiment_name=judge-cost-<run>; then the variant's overrides, then the extra arguments (a later
# override of the same key wins). recipes/base.yaml keeps every recipe on verl's legacy trainer
# (trainer.use_v1=false), where a colocated judge runs. Launcher variables (MODEL, GSM8K_DIR, PYTHON, ...)
# are passed as set; OUTPUT_DIR is COST_DIR/<run>. DRY_RUN=1: the launcher checks each run on CPU, no table.
# Knobs of this script (not passed on): STEPS (8); VARIANTS, space-separated name:KEY=VALUE[,KEY=VALUE...]
# (a comma not followed by KEY= stays in the value, e.g. trainer.logger=[console,file]); RUNS, which runs
# are made (default: all, "rule local" + the variant names); RULE_NAME, JUDGE_NAME: the names of the rule run and
# of the local-judge run (rule, local: their folders, table labels and experiment names); COST_DIR (outputs/judge_cost).
# Output: COST_DIR/<run>/{run.log,metrics.jsonl} and COST_DIR/cost.md.
# Exit status: 0 when every run exited 0, else 1 (the table still holds the runs that finished);
# 2 for a bad VARIANTS entry, run name or RUNS entry, or a variable that looks like a knob but is none (nothing is run).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/scripts/lib.sh"
usage_if_help "$0" "$@"
STEPS=${STEPS:-8}
COST_DIR=${COST_DIR:-$ROOT/outputs/judge_cost}
VARIANTS=${VARIANTS:-}
RECIPES_DIR=${RECIPES_DIR:-$ROOT/recipes}  # tests point it at stand-in recipes
shared=(trainer.total_training_steps=$STEPS actor_rollout_ref.rollout.gpu_memory_utilization=0.3
        trainer.save_freq=-1 trainer.test_freq=-1 trainer.resume_mode=disable)
say() { echo "[judge_cost $(date +%H:%M:%S)] $*"; }
KEY_RE='^(~|\+\+?)?[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*='
bad_variant() {
  echo "VARIANTS: bad entry '$1': $2 (want name:KEY=VALUE[,KEY=VALUE...] with Hydra keys, e.g." \
    "tok128:+reward.custom_reward_function.reward_kwargs.max_tokens=128)" >&2
  exit 2
}
RULE_NAME=${RULE_NAME:-rule}; JUDGE_NAME=${JUDGE_NAME:-local}
export -n RULE_NAME JUDGE_NAME  # knobs of this script, not passed on
NAME_RE='^[A-Za-z0-9_.-]+$'
for n in "$RULE_NAME" "$JUDGE_NAME"; do
  [[ "$n" =~ $NAME_RE ]] || { echo "RULE_NAME/JUDGE_NAME: bad run name '$n': letters, digits, _ . - only" >&2; exit 2; }
done
[ "$RULE_NAME" != "$JUDGE_NAME" ] || { echo "RULE_NAME and JUDGE_NAME are both '$RULE_NAME'" >&2; exit 2; }
names=("$RULE_NAME" "$JUDGE_NAME"); recipes=(gsm8k_rule gsm8k_local_judge); settings=("" "")
for v in $VARIANTS; do
  [[ "$v" == *:* ]] || bad_variant "$v" "no ':'"
  name=${v%%:*}; rest=${v#*:}
  [[ "$name" =~ $NAME_RE ]] || bad_variant "$v" "the name may hold letters, digits, _ . - only"
  [[ " ${names[*]} " == *" $name "* ]] && bad_variant "$v" "the name '$name' is taken"
  items=(); IFS=, read -ra parts <<< "$rest"
  for x in "${parts[@]}"; do
    if [[ "$x" =~ ^[A-Z_][A-Z0-9_]*= ]]; then bad_variant "$v" "${x%%=*} is an environment variable, give the Hydra override"
    elif [[ "$x" =~ $KEY_RE ]]; then items+=("$x")   # a dotted key, or a config group (judge_placement=server)
    elif [ "${#items[@]}" -gt 0 ]; then items[-1]+=",$x"   # a comma inside a value
    else bad_variant "$v" "'$x' is not a Hydra override KEY=VALUE"; fi
  done
  names+=("$name"); recipes+=(gsm8k_local_judge); settings+=("$(printf '%s\n' "${items[@]}")")
done
export PYTHON=${PYTHON:-$(bash "$ROOT/scripts/launch.sh" --print-python)}
check_knobs judge_cost
RUNS=${RUNS:-${names[*]}}
for r in $RUNS; do
  [[ " ${names[*]} " == *" $r "* ]] || { echo "RUNS: no run named '$r' (runs: ${names[*]})" >&2; exit 2; }
done
mkdir -p "$COST_DIR"
files=(); labels=(); fail=0
for i in "${!names[@]}"; do
  name=${names[$i]}
  [[ " $RUNS " == *" $name "* ]] || continue
  out=$COST_DIR/$name; mkdir -p "$out"
  variant=(); [ -n "${settings[$i]}" ] && mapfile -t variant <<< "${settings[$i]}"
  later_wins "${shared[@]}" trainer.default_local_dir="$out/checkpoints" trainer.experiment_name="judge-cost-$name" \
    "${variant[@]}" "$@"
  say "run $name: recipes/${recipes[$i]}${variant[*]:+ ${variant[*]}} ($STEPS steps) -> $out/run.log"
  t0=$(date +%s)
  OUTPUT_DIR="$out" bash "$RECIPES_DIR/${recipes[$i]}/run.sh" "${MERGED[@]}" > "$out/run.log" 2>&1
  rc=$?
  say "run $name: exit $rc in $(( $(date +%s) - t0 )) s"
  [ "$rc" = 0 ] || { fail=1; tail -n 20 "$out/run.log"; }
  [ -s "$out/metrics.jsonl" ] && { files+=("$out/metrics.jsonl"); labels+=("$name"); }
done
if [ "${#files[@]}" -gt 0 ] && ! is_dry; then
  { echo "# Judge cost ($(date -u +%Y-%m-%d), $STEPS steps, medians after step 1)"; echo
    echo "settings: ${shared[*]} VARIANTS=${VARIANTS:-none} overrides: ${*:-none}"; echo
    PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m scripts.report.summarize_run "${files[@]}" \
      --labels "${labels[@]}" --ratio
  } > "$COST_DIR/cost.md"
  cat "$COST_DIR/cost.md"
fi
exit $fail
