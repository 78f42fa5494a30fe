#!/usr/bin/env bash
# gsm8k_api_judge: GRPO-train a policy on GSM8K rewarded by an LLM judge behind an OpenAI-compatible
# API (reward_fns/llm_judge.py through verl's rate_limited reward manager).
# The API key is read by NAME (JUDGE_API_KEY_ENV); its value is never printed or written.
# See README.md for every knob. Extra args = Hydra overrides.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export RECIPE=gsm8k_api_judge REWARD_MODE=api DATA_KIND=gsm8k
export REWARD_FN=${REWARD_FN:-pkg://reward_fns.llm_judge}
export REWARD_MANAGER=${REWARD_MANAGER:-rate_limited}
export JUDGE_BASE_URL=${JUDGE_BASE_URL:-https://api.openai.com/v1}
export JUDGE_MODEL_NAME=${JUDGE_MODEL_NAME:-gpt-4o-mini}
export JUDGE_API_KEY_ENV=${JUDGE_API_KEY_ENV:-OPENAI_API_KEY}
export JUDGE_MODE=${JUDGE_MODE:-judge}
export JUDGE_FALLBACK=${JUDGE_FALLBACK:-rule}
export JUDGE_TIMEOUT=${JUDGE_TIMEOUT:-60}
export JUDGE_MAX_RETRIES=${JUDGE_MAX_RETRIES:-4}
export JUDGE_MAX_TOKENS=${JUDGE_MAX_TOKENS:-512}
export MAX_CONCURRENT=${MAX_CONCURRENT:-64}
export MAX_RPM=${MAX_RPM:-}
export MAX_TPM=${MAX_TPM:-}
source "$HERE/../common.sh"
exec bash "$HERE/../../scripts/launch.sh" "$@"
