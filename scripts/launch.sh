#!/usr/bin/env bash
# The shared launcher: every recipes/<recipe>/run.sh is `exec bash scripts/launch.sh <recipe> "$@"`.
# This wrapper only picks the interpreter, then hands over to scripts/launch/launcher.py (all the logic).
#
#   PYTHON=python3 bash scripts/launch.sh <recipe> ...   # use that interpreter as is (no env setup)
#   bash scripts/launch.sh <recipe> ...                  # .venv via scripts/setup_env.sh (gpu profile
#                                                        # when nvidia-smi works, else cpu: enough for DRY_RUN)
#   bash scripts/launch.sh --print-python                # print the interpreter and exit
#   bash scripts/launch.sh --knobs                       # the environment variables it reads
# Arguments after the recipe are Hydra overrides of recipes/<recipe>/config.yaml; see scripts/launch/launcher.py --help.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -z "${PYTHON:-}" ]; then
  profile=cpu
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then profile=gpu; fi
  PYTHON=$(bash "$ROOT/scripts/setup_env.sh" "$profile" | tail -n 1)
fi
export PYTHON
if [ "${1:-}" = "--print-python" ]; then command -v "$PYTHON"; exit 0; fi
PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" exec "$PYTHON" -m scripts.launch "$@"
