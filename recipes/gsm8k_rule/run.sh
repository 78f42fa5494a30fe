#!/usr/bin/env bash
# gsm8k_rule: GRPO-train a policy on GSM8K with the rule reward reward_fns/gsm8k.py (the baseline).
# See README.md for every knob. Extra args = Hydra overrides.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export RECIPE=gsm8k_rule REWARD_MODE=rule DATA_KIND=gsm8k
export REWARD_FN=${REWARD_FN:-pkg://reward_fns.gsm8k}
source "$HERE/../common.sh"
exec bash "$HERE/../../scripts/launch.sh" "$@"
