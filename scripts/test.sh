#!/usr/bin/env bash
# The test command: installs the CPU profile into .venv if missing, materialises the test model
# (SmolLM2-135M-Instruct, offline, cached), then runs the CPU test suite. Extra args go to pytest.
#
#   bash scripts/test.sh            # full CPU suite
#   bash scripts/test.sh -k parse   # a subset
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
PY=$(bash scripts/setup_env.sh cpu | tail -n 1)
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export VERL_JUDGE_MODEL=${VERL_JUDGE_MODEL:-$("$PY" -m data_prep.model | tail -n 1)}
exec "$PY" -m pytest -m "not gpu" "$@"
