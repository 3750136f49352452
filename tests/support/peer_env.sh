#!/usr/bin/env bash
# Environment for running real peers offline against tests/support/fake_llm.py.
#
# Source it and call a setup function, or execute it with a command:
#
#   source tests/support/peer_env.sh
#   capfleet_claude_env PORT WORKDIR [HOME_DIR]   # exports the Claude Code env
#   capfleet_gemini_env PORT WORKDIR [HOME_DIR]   # Gemini CLI (ACP)
#   capfleet_opencode_env PORT WORKDIR [HOME_DIR] # opencode (config in WORKDIR)
#   capfleet_codex_env PORT WORKDIR [HOME_DIR]    # Codex CLI (CODEX_HOME)
#
#   tests/support/peer_env.sh claude PORT WORKDIR [HOME_DIR] -- claude -p ...   # one-shot
#
# This file is the single source of truth for the peers' offline environment:
# the Rust test helpers (tests/all/common/peers.rs, `claude_env`) run
# `peer_env.sh claude PORT WORKDIR HOME_DIR -- env -0` and use what it prints.
#
# Each function makes HOME a throw-away directory (mktemp -d unless HOME_DIR is
# given), seeds the peer's config there from tests/support/configs/ with
# <CWD> -> WORKDIR and <PORT> -> PORT, and exports the variables. Nothing
# reaches the network: every base URL is http://127.0.0.1:PORT.
#
# Claude Code 2.1.337 (stream-json and TUI):
#   HOME=<tmp>                       isolates ~/.claude, ~/.claude.json, sessions
#   ANTHROPIC_BASE_URL=http://127.0.0.1:PORT   (it calls POST /v1/messages?beta=true)
#   ANTHROPIC_API_KEY=dummy          (init reports apiKeySource "ANTHROPIC_API_KEY")
#   CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1  DISABLE_AUTOUPDATER=1
#   DISABLE_TELEMETRY=1  DISABLE_ERROR_REPORTING=1
#   $HOME/.claude.json = configs/claude.json (onboarding done, key "dummy"
#   approved, WORKDIR trusted) - needed by the TUI, harmless for -p.
#   ANTHROPIC_AUTH_TOKEN / CLAUDE_CODE_OAUTH_TOKEN are unset so a developer's
#   own credentials never leak into a test run.
# claude-agent-acp additionally needs IS_SANDBOX=1 when running as root.

_capfleet_support_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

_capfleet_home() { # HOME_DIR-or-empty
  local h=${1:-}
  [ -n "$h" ] || h=$(mktemp -d "${TMPDIR:-/tmp}/capfleet-home.XXXXXX")
  mkdir -p "$h"
  printf '%s\n' "$h"
}

_capfleet_seed() { # template dest port cwd
  mkdir -p "$(dirname "$2")"
  sed -e "s|<CWD>|$4|g" -e "s|<PORT>|$3|g" "$_capfleet_support_dir/configs/$1" >"$2"
}

_capfleet_common() { # port
  unset ANTHROPIC_AUTH_TOKEN CLAUDE_CODE_OAUTH_TOKEN OPENAI_API_KEY GOOGLE_API_KEY \
        GOOGLE_APPLICATION_CREDENTIALS 2>/dev/null || true
  export NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost
  export CAPFLEET_FAKE_LLM_URL="http://127.0.0.1:$1"
}

capfleet_claude_env() { # PORT WORKDIR [HOME_DIR]
  local port=$1 cwd; cwd=$(cd "$2" && pwd)
  HOME=$(_capfleet_home "${3:-}"); export HOME
  _capfleet_common "$port"
  _capfleet_seed claude.json "$HOME/.claude.json" "$port" "$cwd"
  export ANTHROPIC_BASE_URL="http://127.0.0.1:$port"
  export ANTHROPIC_API_KEY=dummy
  export CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
  export DISABLE_AUTOUPDATER=1 DISABLE_TELEMETRY=1 DISABLE_ERROR_REPORTING=1
  export IS_SANDBOX=1   # claude-agent-acp as root; ignored by plain claude -p
}

capfleet_gemini_env() { # PORT WORKDIR [HOME_DIR]
  local port=$1 cwd; cwd=$(cd "$2" && pwd)
  HOME=$(_capfleet_home "${3:-}"); export HOME
  _capfleet_common "$port"
  _capfleet_seed gemini-settings.json "$HOME/.gemini/settings.json" "$port" "$cwd"
  export GEMINI_API_KEY=dummy
  export GOOGLE_GEMINI_BASE_URL="http://127.0.0.1:$port"
  export GEMINI_CLI_TRUST_WORKSPACE=true
  # Always run `gemini --acp -m gemini-2.5-flash`: the default "auto" model
  # first asks a classifier model and retries until it times out.
}

capfleet_opencode_env() { # PORT WORKDIR [HOME_DIR]
  local port=$1 cwd; cwd=$(cd "$2" && pwd)
  HOME=$(_capfleet_home "${3:-}"); export HOME
  _capfleet_common "$port"
  _capfleet_seed opencode.json "$cwd/opencode.json" "$port" "$cwd"
  export XDG_CONFIG_HOME="$HOME/.config" XDG_DATA_HOME="$HOME/.local/share" \
         XDG_CACHE_HOME="$HOME/.cache" XDG_STATE_HOME="$HOME/.local/state"
  export OPENCODE_DISABLE_AUTOUPDATE=1
  # run: opencode acp --pure
}

capfleet_codex_env() { # PORT WORKDIR [HOME_DIR]
  local port=$1 cwd; cwd=$(cd "$2" && pwd)
  HOME=$(_capfleet_home "${3:-}"); export HOME
  _capfleet_common "$port"
  export CODEX_HOME="$HOME/.codex"
  # Where the system has bubblewrap, Codex runs a command as `bwrap … codex-linux-sandbox`
  # through an alias it makes under CODEX_HOME, and makes none when CODEX_HOME lies in the
  # temp dir (the command then fails, no item). A user's ~/.codex never does: keep the
  # throw-away home's CODEX_HOME outside TMPDIR by moving TMPDIR inside the home.
  export TMPDIR="$HOME/tmp"; mkdir -p "$TMPDIR"
  _capfleet_seed codex-config.toml "$CODEX_HOME/config.toml" "$port" "$cwd"
  export FAKE_API_KEY=dummy
  # run: codex exec --json --skip-git-repo-check "PROMPT" </dev/null
  # (kill the whole process group afterwards: the TUI leaves a daemon behind)
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  home_dir=
  if [ $# -ge 5 ] && [ "$4" != "--" ] && [ "$5" = "--" ]; then home_dir=$4; set -- "$1" "$2" "$3" "${@:5}"; fi
  [ $# -ge 4 ] && [ "$4" = "--" ] || {
    echo "usage: $0 claude|gemini|opencode|codex PORT WORKDIR [HOME_DIR] -- COMMAND..." >&2; exit 2; }
  peer=$1 port=$2 cwd=$3; shift 4
  "capfleet_${peer}_env" "$port" "$cwd" "$home_dir"
  cd "$cwd"
  exec "$@"
fi
