# Helpers shared by the shell scripts; sourced (`source "$ROOT/scripts/lib.sh"`), not run. The Hydra
# override parsing is Python's (scripts/launch/overrides.py); PYTHON must be set before later_wins / override_value.

# print_usage FILE: the script's header comment (from line 2 to the first line not starting with #).
print_usage() { awk 'NR>1 && /^#/ {sub(/^# ?/, ""); print; next} NR>1 {exit}' "$1"; }
# usage_if_help FILE "$@": print the usage and exit 0 when the first argument is -h or --help.
usage_if_help() { case "${2:-}" in -h|--help) print_usage "$1"; exit 0;; esac; }
# is_dry: DRY_RUN is set to something other than 0.
is_dry() { [ "${DRY_RUN:-0}" != 0 ] && [ -n "${DRY_RUN:-}" ]; }
py_root() { PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" "$@"; }
# later_wins OVERRIDE...: sets the array MERGED to the overrides in order, less each one whose key a later
# one sets again (the later value wins, as in the launcher; Hydra refuses a second '+key').
later_wins() { mapfile -t MERGED < <(py_root -m scripts.launch.overrides merge "$@"); }
# override_value KEY OVERRIDE...: the value the last override of KEY sets (empty when none does).
override_value() { py_root -m scripts.launch.overrides value "$@"; }
# check_knobs WHO: exit 2 naming each variable set that looks like a knob (JUDGE_*, TRAIN_*, ...) but is none.
check_knobs() { py_root -m scripts.launch.knobs --check "$1" || exit 2; }
