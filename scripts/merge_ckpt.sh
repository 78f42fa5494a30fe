#!/usr/bin/env bash
# Merge a verl FSDP checkpoint into a Hugging Face folder with verl's own merger (verl.model_merger).
#
#   bash scripts/merge_ckpt.sh CKPT_DIR TARGET_DIR [STEP]
#
# CKPT_DIR is trainer.default_local_dir (holds global_step_N/ and latest_checkpointed_iteration.txt);
# STEP defaults to the latest checkpointed step. The merge writes TARGET_DIR.tmp and renames it to
# TARGET_DIR only when it succeeded, with TARGET_DIR/.complete naming the source; a TARGET_DIR that
# already has .complete is left alone (delete it to merge again). DRY_RUN=1 prints the command only.
# PYTHON: interpreter with verl (default: what scripts/launch.sh uses).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/scripts/lib.sh"
usage_if_help "$0" "$@"
if [ $# -lt 2 ] || [ $# -gt 3 ]; then print_usage "$0"; exit 1; fi
CKPT=$1 TARGET=${2%/} STEP=${3:-}
say() { echo "[merge] $*"; }
if [ -f "$TARGET/.complete" ]; then say "skipped: $TARGET/.complete exists ($(cat "$TARGET/.complete"))"; exit 0; fi
if [ -z "$STEP" ]; then
  STEP=$(cat "$CKPT/latest_checkpointed_iteration.txt" 2>/dev/null || echo "<N>")
fi
src=$CKPT/global_step_$STEP/actor
PY=${PYTHON:-$(bash "$ROOT/scripts/launch.sh" --print-python)}
cmd=("$PY" -m verl.model_merger merge --backend fsdp --local_dir "$src" --target_dir "$TARGET.tmp")
say "command: ${cmd[*]}"
if is_dry; then say "DRY_RUN: merge not run"; exit 0; fi
[ -d "$src" ] || { say "ERROR: no checkpoint at $src (was one saved? SAVE_FREQ must be > 0)"; exit 3; }
rm -rf "$TARGET.tmp"
(cd "$ROOT" && "${cmd[@]}")
[ -f "$TARGET.tmp/config.json" ] || { say "ERROR: the merger wrote no config.json into $TARGET.tmp"; exit 3; }
echo "merged from $src" > "$TARGET.tmp/.complete"
rm -rf "$TARGET"; mv "$TARGET.tmp" "$TARGET"
say "output: $TARGET"
