#!/usr/bin/env bash
# judge_pointwise: GRPO-train a generative judge that answers <think>...</think><score>0-4</score>,
# rewarded by reward_fns/pointwise.py. See README.md for every knob. Extra args = Hydra overrides.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export RECIPE=judge_pointwise REWARD_MODE=rule DATA_KIND=verify_pointwise
export REWARD_FN=${REWARD_FN:-pkg://reward_fns.pointwise}
export MAX_PROMPT_LENGTH=${MAX_PROMPT_LENGTH:-1280}
export MAX_RESPONSE_LENGTH=${MAX_RESPONSE_LENGTH:-512}
export SAVE_FREQ=${SAVE_FREQ:-50}
source "$HERE/../common.sh"
exec bash "$HERE/../../scripts/launch.sh" "$@"
