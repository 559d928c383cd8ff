# Sourced by the ci/actions/ steps: where this checkout is, and how a step says its outputs.
# shellcheck shell=bash

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

# `name=value` to the step's outputs ($GITHUB_OUTPUT); on stdout when run by hand.
output() {
  if [ -n "${GITHUB_OUTPUT:-}" ]; then
    printf '%s=%s\n' "$1" "$2" >>"$GITHUB_OUTPUT"
  else
    printf '%s=%s\n' "$1" "$2"
  fi
}

# Markdown for the run's summary page ($GITHUB_STEP_SUMMARY); nowhere when run by hand.
summary() {
  if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
    cat >>"$GITHUB_STEP_SUMMARY"
  else
    cat >/dev/null
  fi
}

# The settings ci/provision wrote for this checkout (engines' binaries, connectors' launchers).
load_settings() {
  local f
  f="$("$ROOT/ci/provision" --env-file)"
  [ -f "$f" ] || { echo "$STEP: no settings at $f: run ci/actions/provision first" >&2; exit 2; }
  set -a
  # shellcheck source=/dev/null
  . "$f"
  set +a
}

# The emq-gate that ci/actions/install built: $EMQ_GATE, else this checkout's dev build.
gate_binary() {
  GATE="${EMQ_GATE:-$ROOT/target/debug/emq-gate}"
  [ -x "$GATE" ] || { echo "$STEP: no emq-gate at $GATE (run ci/actions/install, or set EMQ_GATE)" >&2; exit 2; }
}
