# shellcheck shell=bash
# compat-tests/lib/prepare.sh: sourced by every compat-tests/<suite>/prepare, so that each says
# what it is doing and, when it fails, what failed. Provides:
#   step "what"       prints "<suite>: what" and remembers it as the step under way;
#   die "why"         prints "<suite>/prepare: failed while <step> (line N: why)" and exits 1,
#                     for a check that fails without a failing command (a tool missing, ...);
#   logged LOG CMD... runs CMD with its output appended to LOG; on failure prints LOG's last 30
#                     lines to stderr and fails (the ERR trap then names CMD and LOG).
# and an ERR trap that prints "<suite>/prepare: failed while <step> (line N: <command>)" to
# stderr for any command that fails (set -e then ends the script). <suite> is the name of the
# sourcing script's folder. Until the first `step`, the step is "checking what is already
# prepared" (every prepare starts so, to stay idempotent).
set -eEuo pipefail  # -E: the ERR trap also fires for a command failing inside a function
prepare_suite=$(basename "$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)")
prepare_step="checking what is already prepared"
prepare_failed_command=""

step() {
  prepare_step=$*
  echo "$prepare_suite: $prepare_step"
}

die() {
  echo "$prepare_suite/prepare: failed while $prepare_step (line ${BASH_LINENO[0]}: $*)" >&2
  exit 1
}

logged() {
  local log=$1 rc=0
  shift
  "$@" >> "$log" 2>&1 || rc=$?
  [ "$rc" -eq 0 ] && return 0
  tail -n 30 "$log" >&2
  prepare_failed_command="$*, exit $rc; the last 30 lines of $log are above"
  return "$rc"
}

prepare_on_err() {  # LINE COMMAND
  # With -E, a command failing in a subshell ( ... ) or $( ... ) fires the trap there too; only
  # the script's own shell reports, once, for the subshell as a whole.
  [ "$BASHPID" = "$$" ] || return 0
  echo "$prepare_suite/prepare: failed while $prepare_step (line $1: ${prepare_failed_command:-$2})" >&2
}
trap 'prepare_on_err "$LINENO" "$BASH_COMMAND"' ERR
