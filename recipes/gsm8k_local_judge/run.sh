#!/usr/bin/env bash
# gsm8k_local_judge: GRPO-train a policy on GSM8K rewarded by a frozen LLM judge that verl's reward
# loop serves (reward.reward_model.enable=True): colocated with the policy on the same GPU(s) by
# default, its own GPU pool when JUDGE_GPUS > 0. See README.md for every knob. Extra args = Hydra overrides.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export RECIPE=gsm8k_local_judge REWARD_MODE=local DATA_KIND=gsm8k
export REWARD_FN=${REWARD_FN:-pkg://reward_fns.llm_judge}
export JUDGE_MODEL=${JUDGE_MODEL:-}
export JUDGE_GPUS=${JUDGE_GPUS:-0}
export JUDGE_TP=${JUDGE_TP:-1}
export JUDGE_GPU_MEM_UTIL=${JUDGE_GPU_MEM_UTIL:-0.2}
export JUDGE_ROLLOUT_ENGINE=${JUDGE_ROLLOUT_ENGINE:-vllm}
export JUDGE_ENFORCE_EAGER=${JUDGE_ENFORCE_EAGER:-1}
export JUDGE_SLEEP=${JUDGE_SLEEP:-1}
export JUDGE_MODE=${JUDGE_MODE:-judge}
export JUDGE_FALLBACK=${JUDGE_FALLBACK:-rule}
export JUDGE_TIMEOUT=${JUDGE_TIMEOUT:-60}
export JUDGE_MAX_RETRIES=${JUDGE_MAX_RETRIES:-2}
export JUDGE_MAX_TOKENS=${JUDGE_MAX_TOKENS:-512}
export GPU_MEM_UTIL=${GPU_MEM_UTIL:-0.3}
source "$HERE/../common.sh"
exec bash "$HERE/../../scripts/launch.sh" "$@"
