#!/usr/bin/env bash
# judge_to_reward: one resumable pipeline that trains a judge and reuses it as the reward.
#   stage 1  build GSM8K verification data (pointwise) and GSM8K policy data   (data_prep)
#   stage 2  train the judge: recipes/judge_pointwise on the verification data  (FSDP checkpoints)
#   stage 3  merge the judge's latest checkpoint into a HF folder               (verl.model_merger)
#   stage 4  train the policy: recipes/gsm8k_local_judge with JUDGE_MODEL = that folder
# A stage whose output exists is skipped (stage 2/4: a .done marker written on success; an
# interrupted stage resumes from its checkpoints because RESUME_MODE=auto). Every stage prints its
# output path. DRY_RUN=1 / DRY_RUN=print go through every stage without training or merging.
# Extra arguments are Hydra overrides given to BOTH training stages. See README.md for every knob.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
export PIPELINE_DIR=${PIPELINE_DIR:-$ROOT/outputs/judge_to_reward}
export JUDGE_STEPS=${JUDGE_STEPS:-}
export POLICY_STEPS=${POLICY_STEPS:-}
export JUDGE_SAVE_FREQ=${JUDGE_SAVE_FREQ:-50}
export JUDGE_TRAIN_FILES=${JUDGE_TRAIN_FILES:-}
export JUDGE_VAL_FILES=${JUDGE_VAL_FILES:-}
export POLICY_TRAIN_FILES=${POLICY_TRAIN_FILES:-}
export POLICY_VAL_FILES=${POLICY_VAL_FILES:-}
source "$ROOT/scripts/lib.sh"
say() { echo "[judge_to_reward] $*"; }
JUDGE_DIR=$PIPELINE_DIR/judge
JUDGE_CKPT=$JUDGE_DIR/checkpoints
JUDGE_HF=$PIPELINE_DIR/judge_hf
POLICY_DIR=$PIPELINE_DIR/policy
POLICY_CKPT=$POLICY_DIR/checkpoints

# ---- stage 1: data (data_prep skips files that exist)
data_files() {  # $1 = recipe whose default data to build (with that recipe's settings); prints "train val"
  local out
  out=$(bash "$ROOT/recipes/$1/run.sh" --build-data) || { printf '%s\n' "$out" >&2; return 1; }
  printf '%s\n' "$out" | grep -v '^train=\|^val=' >&2 || true
  printf '%s %s\n' "$(printf '%s\n' "$out" | sed -n 's/^train=//p')" "$(printf '%s\n' "$out" | sed -n 's/^val=//p')"
}
say "stage 1/4: data"
if [ -z "$JUDGE_TRAIN_FILES" ] || [ -z "$JUDGE_VAL_FILES" ]; then
  files=$(data_files judge_pointwise) || { say "ERROR: stage 1 could not build the judge data"; exit 3; }
  read -r t v <<< "$files"
  JUDGE_TRAIN_FILES=${JUDGE_TRAIN_FILES:-$t}; JUDGE_VAL_FILES=${JUDGE_VAL_FILES:-$v}
fi
if [ -z "$POLICY_TRAIN_FILES" ] || [ -z "$POLICY_VAL_FILES" ]; then
  files=$(data_files gsm8k_local_judge) || { say "ERROR: stage 1 could not build the policy data"; exit 3; }
  read -r t v <<< "$files"
  POLICY_TRAIN_FILES=${POLICY_TRAIN_FILES:-$t}; POLICY_VAL_FILES=${POLICY_VAL_FILES:-$v}
fi
say "stage 1 output: judge data $JUDGE_TRAIN_FILES , $JUDGE_VAL_FILES"
say "stage 1 output: policy data $POLICY_TRAIN_FILES , $POLICY_VAL_FILES"

# ---- stage 2: train the judge
say "stage 2/4: judge training (recipes/judge_pointwise)"
if [ -f "$JUDGE_DIR/.done" ]; then
  say "stage 2 skipped: $JUDGE_DIR/.done exists"
else
  TRAIN_FILES=$JUDGE_TRAIN_FILES VAL_FILES=$JUDGE_VAL_FILES TOTAL_STEPS=$JUDGE_STEPS SAVE_FREQ=$JUDGE_SAVE_FREQ \
  EXPERIMENT=judge_to_reward-judge CKPT_DIR=$JUDGE_CKPT OUTPUT_DIR=$JUDGE_DIR METRICS_FILE=$JUDGE_DIR/metrics.jsonl \
    bash "$ROOT/recipes/judge_pointwise/run.sh" "$@"
  is_dry || touch "$JUDGE_DIR/.done"
fi
say "stage 2 output: $JUDGE_CKPT"

# ---- stage 3: merge the latest judge checkpoint into a Hugging Face folder
say "stage 3/4: merge (verl.model_merger)"
if [ -f "$JUDGE_HF/.complete" ]; then
  say "stage 3 skipped: $JUDGE_HF/.complete exists"
else
  bash "$ROOT/scripts/merge_ckpt.sh" "$JUDGE_CKPT" "$JUDGE_HF"
fi
say "stage 3 output: $JUDGE_HF"

# ---- stage 4: train the policy with the merged judge as its local reward
say "stage 4/4: policy training (recipes/gsm8k_local_judge, JUDGE_MODEL=$JUDGE_HF)"
judge_model=$JUDGE_HF
if [ ! -f "$JUDGE_HF/.complete" ]; then
  is_dry || { say "ERROR: $JUDGE_HF is not complete"; exit 3; }
  judge_model=${JUDGE_MODEL:-}
  say "DRY_RUN: $JUDGE_HF does not exist yet; validating with JUDGE_MODEL=${judge_model:-<the policy model>} instead"
fi
if [ -f "$POLICY_DIR/.done" ]; then
  say "stage 4 skipped: $POLICY_DIR/.done exists"
else
  JUDGE_MODEL=$judge_model TRAIN_FILES=$POLICY_TRAIN_FILES VAL_FILES=$POLICY_VAL_FILES TOTAL_STEPS=$POLICY_STEPS \
  EXPERIMENT=judge_to_reward-policy CKPT_DIR=$POLICY_CKPT OUTPUT_DIR=$POLICY_DIR METRICS_FILE=$POLICY_DIR/metrics.jsonl \
    bash "$ROOT/recipes/gsm8k_local_judge/run.sh" "$@"
  is_dry || touch "$POLICY_DIR/.done"
fi
say "stage 4 output: $POLICY_CKPT"
say "done: judge checkpoints $JUDGE_CKPT, judge HF folder $JUDGE_HF, policy checkpoints $POLICY_CKPT"
