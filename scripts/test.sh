#!/usr/bin/env bash
# The test command: installs the CPU profile into .venv if missing, materialises the test model
# (SmolLM2-135M-Instruct, offline, cached), then runs the CPU test suite on two workers. Extra args go to pytest.
#
#   bash scripts/test.sh            # the CPU suite without the slow set
#   bash scripts/test.sh --slow     # the slow set alone: end-to-end runs (real model, servers, Ray, whole workflows)
#   bash scripts/test.sh --all      # both
#   bash scripts/test.sh -k parse   # a subset
#   bash scripts/test.sh -n 0       # serially (one process)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
case "${1:-}" in
  --slow) MARKS="slow and not gpu"; shift ;;
  --all) MARKS="not gpu"; shift ;;
  *) MARKS="not gpu and not slow" ;;
esac
PY=$(bash scripts/setup_env.sh cpu | tail -n 1)
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export VERL_JUDGE_MODEL=${VERL_JUDGE_MODEL:-$("$PY" -m data_prep.model | tail -n 1)}
# two workers, each test module on one of them (its module fixtures made once)
exec "$PY" -m pytest -m "$MARKS" -n 2 --dist loadscope "$@"
