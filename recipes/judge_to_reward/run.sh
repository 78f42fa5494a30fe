#!/usr/bin/env bash
# judge_to_reward: train a pointwise judge, then a GSM8K policy rewarded by it, in one resumable run:
# python -m scripts.pipeline judge_to_reward (--help lists every option and stage); DRY_RUN=1 checks both
# training stages' recipe configs instead. See README.md.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PYTHON=$(bash "$ROOT/scripts/launch.sh" --print-python) || exit 1
PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" exec "$PYTHON" -m scripts.pipeline judge_to_reward \
  --out "$ROOT/outputs/judge_to_reward" "$@"
