#!/usr/bin/env bash
# Coverage-guided fuzzing of one decoder with AFL++ (cargo-afl, stable Rust).
#
#   fuzz/afl/run.sh TARGET [SECONDS]     e.g. fuzz/afl/run.sh stream_json 300
#
# Builds the instrumented target once (release), seeds AFL with the target's seeds (the
# same files the property tests start from, in pieces), runs afl-fuzz for SECONDS
# (default 300), prints its figures, and copies every crash it found into
# fuzz/regressions/TARGET/, where the suite replays it (`./tests/run.sh` fails until the
# decoder is fixed). Needs `cargo install cargo-afl` (it builds AFL++ on install).
set -euo pipefail
cd "$(dirname "$0")"
target=${1:?usage: run.sh TARGET [SECONDS]}
seconds=${2:-300}
command -v cargo-afl >/dev/null || { echo "run.sh: cargo-afl not found: cargo install --locked cargo-afl" >&2; exit 1; }
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/capfleet/afl-target}"
cargo afl build --release --quiet
bin="$CARGO_TARGET_DIR/release/capfleet-afl"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The seeds, as the property tests take them: files in pieces of 16 KiB at most.
CAPFLEET_AFL_TARGET="$target" "$bin" --seeds "$work/in"
[ -n "$(ls -A "$work/in" 2>/dev/null)" ] || { echo "run.sh: no seeds for target '$target'" >&2; exit 1; }

# No core dumps piped to a handler, no CPU frequency check: a container or a VM.
export AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_SKIP_CPUFREQ=1 AFL_NO_UI=1
CAPFLEET_AFL_TARGET="$target" cargo afl fuzz -i "$work/in" -o "$work/out" -V "$seconds" "$bin" >"$work/afl.log" 2>&1 || true
stats="$work/out/default/fuzzer_stats"
[ -f "$stats" ] || { cat "$work/afl.log" >&2; echo "run.sh: afl-fuzz did not start (log above)" >&2; exit 1; }
grep -E '^(execs_done|execs_per_sec|corpus_count|edges_found|total_edges|saved_crashes|saved_hangs|run_time) ' "$stats"
keep="../regressions/$target"
found=0
for crash in "$work"/out/default/crashes/id:*; do
  [ -e "$crash" ] || continue
  mkdir -p "$keep"
  cp "$crash" "$keep/afl-$(sha256sum "$crash" | cut -c1-16).bin"
  found=$((found + 1))
done
echo "crashes kept under fuzz/regressions/$target/: $found"
