#!/usr/bin/env bash
# judge_to_reward: train a pointwise judge, then a GSM8K policy rewarded by it, in one resumable run:
# python -m scripts.pipeline judge_to_reward (--help lists every option and stage). DRY_RUN=1 checks
# both training stages' recipe configs with the shared launcher instead. See README.md.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
for v in PIPELINE_DIR JUDGE_STEPS POLICY_STEPS JUDGE_SAVE_FREQ JUDGE_TRAIN_FILES JUDGE_VAL_FILES POLICY_TRAIN_FILES POLICY_VAL_FILES; do
  [ -z "${!v:-}" ] || { echo "judge_to_reward: $v is no longer read; use the options in --help (--out, --grpo-steps, --policy-steps, ...)" >&2; exit 2; }
done
if [ "${DRY_RUN:-0}" != 0 ]; then exec bash "$ROOT/scripts/launch.sh" judge_to_reward "$@"; fi
PYTHON=$(bash "$ROOT/scripts/launch.sh" --print-python)
PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" exec "$PYTHON" -m scripts.pipeline judge_to_reward \
  --out "$ROOT/outputs/judge_to_reward" "$@"
