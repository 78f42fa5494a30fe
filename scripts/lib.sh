# Helpers shared by the shell scripts; sourced (`source "$ROOT/scripts/lib.sh"`), not run.

# print_usage FILE: the script's header comment (from line 2 to the first line not starting with #).
print_usage() { awk 'NR>1 && /^#/ {sub(/^# ?/, ""); print; next} NR>1 {exit}' "$1"; }
# usage_if_help FILE "$@": print the usage and exit 0 when the first argument is -h or --help.
usage_if_help() { case "${2:-}" in -h|--help) print_usage "$1"; exit 0;; esac; }
# is_dry: DRY_RUN is set to something other than 0.
is_dry() { [ "${DRY_RUN:-0}" != 0 ] && [ -n "${DRY_RUN:-}" ]; }
