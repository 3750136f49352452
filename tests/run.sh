#!/usr/bin/env bash
# The whole test suite, on a fresh machine or a warm one: installs what the tests need,
# then runs every test. An interop test whose peer is missing fails; it never skips.
#
#   ./tests/run.sh            everything
#   ./tests/run.sh sim_tui    extra arguments go to the test runner (a filter, say)
set -euo pipefail
cd "$(dirname "$0")/.."

# Third-party peers (pinned npm/PyPI agents) are installed here by later suites,
# keyed by their pinned versions, and reused when present.
export CAPFLEET_PEERS_DIR="${CAPFLEET_PEERS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/capfleet/peers}"
mkdir -p "$CAPFLEET_PEERS_DIR"

if cargo nextest --version >/dev/null 2>&1; then
  # (The suite has no doctests; nextest does not run them.)
  cargo nextest run --workspace --no-fail-fast "$@"
else
  cargo test --workspace --no-fail-fast "$@"
fi
