# Helpers shared by the shell scripts; sourced (`source "$ROOT/scripts/lib.sh"`), not run.

# print_usage FILE: the script's header comment (from line 2 to the first line not starting with #).
print_usage() { awk 'NR>1 && /^#/ {sub(/^# ?/, ""); print; next} NR>1 {exit}' "$1"; }
# usage_if_help FILE "$@": print the usage and exit 0 when the first argument is -h or --help.
usage_if_help() { case "${2:-}" in -h|--help) print_usage "$1"; exit 0;; esac; }
# is_dry: DRY_RUN is set to something other than 0.
is_dry() { [ "${DRY_RUN:-0}" != 0 ] && [ -n "${DRY_RUN:-}" ]; }
# override_key OVERRIDE: the Hydra key of KEY=VALUE, without a leading ~, + or ++.
override_key() { local k=${1%%=*}; while [[ $k == [~+]* ]]; do k=${k:1}; done; printf '%s\n' "$k"; }
# later_wins OVERRIDE...: sets the array MERGED to the overrides in order, less each one whose key a later
# one sets again (the later value wins, as in the launcher; Hydra refuses a second '+key').
later_wins() {
  MERGED=(); local -a all=("$@"); local i j ki
  for ((i = 0; i < ${#all[@]}; i++)); do
    ki=$(override_key "${all[i]}")
    for ((j = i + 1; j < ${#all[@]}; j++)); do [ "$(override_key "${all[j]}")" = "$ki" ] && continue 2; done
    MERGED+=("${all[i]}")
  done
}
# override_value KEY OVERRIDE...: the value the last override of KEY sets (empty when none does).
override_value() {
  local key=$1 v= o; shift
  for o in "$@"; do [ "$(override_key "$o")" = "$key" ] && v=${o#*=}; done
  printf '%s\n' "$v"
}
# stop_if_retired PYTHON WHO: exit 2 with the launcher's message when a variable it no longer reads is set
# (scripts/launch.py RETIRED), before anything is started.
stop_if_retired() {
  PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" "$1" -c '
import os, sys
from scripts.launch import retired
msgs = retired(os.environ)
for m in msgs:
    print(f"{sys.argv[1]}: {m}", file=sys.stderr)
sys.exit(2 if msgs else 0)' "$2" || exit 2
}
