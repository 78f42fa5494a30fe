#!/usr/bin/env bash
# The test command: installs the CPU profile into .venv if missing, materialises the test model
# (SmolLM2-135M-Instruct, offline, cached), then runs the CPU test suite. Extra args go to pytest.
#
#   bash scripts/test.sh            # full CPU suite
#   bash scripts/test.sh -k parse   # a subset
#   bash scripts/test.sh -n 0       # serially (one process)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
PY=$(bash scripts/setup_env.sh cpu | tail -n 1)
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export VERL_JUDGE_MODEL=${VERL_JUDGE_MODEL:-$("$PY" -m data_prep.model | tail -n 1)}
# two workers, each test module on one of them (its module fixtures made once): 14 min on 2 cores against 21 serially
exec "$PY" -m pytest -m "not gpu" -n 2 --dist loadscope "$@"
