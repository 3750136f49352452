#!/usr/bin/env bash
# The whole test suite, on a fresh machine or a warm one: installs what the tests need,
# then runs every test. An interop test whose peer is missing fails; it never skips.
#
#   ./tests/run.sh            everything
#   ./tests/run.sh sim_tui    extra arguments go to the test runner (a filter, say);
#                             a bare word naming a module of a crate's one test binary
#                             (tests/all/NAME.rs, engine/tests/all/NAME.rs or
#                             protocol/tests/all/NAME.rs) selects that module's tests:
#                             with nextest `-E 'binary_id(<crate>::all) & test(/^NAME::/)'`,
#                             with cargo test `--test all -- NAME::` (a substring match)
set -euo pipefail
cd "$(dirname "$0")/.."

# The pinned third-party peers the suite runs (names from tests/support/install_peers.sh --list).
PEERS=(claude-code py-acp aider claude-agent-acp gemini opencode codex codex-acp pytest phoenix claude-agent-sdk a2a-py a2a-js gemini-a2a openapi-spec-validator schemathesis nats-server mcp-py)

die() { echo "tests/run.sh: $*" >&2; exit 1; }

# Tools the interop tests need: python3 (the fake LLM, venv peers) and node/npm (npm peers).
# (.ci/run installs them with apt-get on a fresh machine; tests/support/README.md lists versions.)
command -v python3 >/dev/null \
  || die "python3 not found: install Python >= 3.10 (Debian: apt-get install python3 python3-venv)"
python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
  || die "python3 >= 3.10 required, found $(python3 --version 2>&1)"
command -v node >/dev/null \
  || die "node not found: install Node.js >= 20 with npm (Debian: NodeSource nodejs 20)"
node -e 'process.exit(parseInt(process.versions.node, 10) < 20 ? 1 : 0)' \
  || die "node >= 20 required, found $(node --version)"
command -v npm >/dev/null || die "npm not found: install npm (Debian: apt-get install npm)"
# The live view's and the chat REPL's tests (tests/all/live_view.rs, chat_repl.rs) run
# capfleet in a real terminal.
command -v tmux >/dev/null || die "tmux not found: install it (Debian: apt-get install tmux)"
# The observability tests start Prometheus and run promtool: Debian's `prometheus`,
# installed here when missing (as root) or asked for.
if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== apt-get install prometheus"
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus
  else
    die "prometheus/promtool not found: install them (Debian: apt-get install prometheus)"
  fi
fi

# The web console's tests (tests/all/console_browser.rs) and bench drive Debian's
# chromium through chromedriver (chromium-driver), installed here when missing (as root).
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== apt-get install chromium chromium-driver"
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium chromium-driver
  else
    die "chromium/chromedriver not found: install them (Debian: apt-get install chromium chromium-driver)"
  fi
fi

# Third-party peers are installed here, keyed by their pinned versions, and reused when present.
export CAPFLEET_PEERS_DIR="${CAPFLEET_PEERS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/capfleet/peers}"
mkdir -p "$CAPFLEET_PEERS_DIR"
echo "== peers (${CAPFLEET_PEERS_DIR})"
for p in "${PEERS[@]}"; do
  # install_peers.sh prints one line per peer: "<peer> <version> installed|cached <dir>".
  tests/support/install_peers.sh "$p" || die "installing peer '$p' failed (see above)"
done

# Each crate has one integration-test binary, `all`, with a module per area.
args=() modules=() filters=()
for a in "$@"; do
  crate=""
  if [[ $a =~ ^[A-Za-z0-9_]+$ ]]; then
    for c in capfleet:tests capfleet-engine:engine/tests capfleet-protocol:protocol/tests; do
      if [ -f "${c#*:}/all/$a.rs" ]; then crate=${c%%:*}; fi
    done
  fi
  if [ -n "$crate" ]; then
    modules+=("$a::") filters+=("(binary_id($crate::all) & test(/^$a::/))")
  else
    args+=("$a")
  fi
done

if cargo nextest --version >/dev/null 2>&1; then
  if [ ${#filters[@]} -gt 0 ]; then
    expr=${filters[0]}
    for f in "${filters[@]:1}"; do expr="$expr | $f"; done
    args+=(-E "$expr")
  fi
  # (The suite has no doctests; nextest does not run them.)
  cargo nextest run --workspace --no-fail-fast ${args[@]+"${args[@]}"}
elif [ ${#modules[@]} -gt 0 ]; then
  cargo test --workspace --no-fail-fast --test all ${args[@]+"${args[@]}"} -- "${modules[@]}"
else
  cargo test --workspace --no-fail-fast ${args[@]+"${args[@]}"}
fi
