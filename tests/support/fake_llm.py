#!/usr/bin/env python3
"""capfleet's scripted fake LLM for interop tests (Python 3.11 stdlib only).

One threaded HTTP server on 127.0.0.1 that speaks enough of four wire APIs for
real agent CLIs (Claude Code, claude-agent-acp, Gemini CLI, opencode, Codex,
aider) to run offline against it:

  Anthropic  POST /v1/messages[?beta=true]        stream (SSE) and non-stream
             POST /v1/messages/count_tokens
  OpenAI     POST /v1/chat/completions            stream and non-stream, tool_calls
             POST /v1/responses                   stream (SSE) and non-stream
  Gemini     POST /v1beta/models/M:streamGenerateContent[?alt=sse]
             POST /v1beta/models/M:generateContent, :countTokens
  Listing    GET  /v1/models, /v1/models/ID, /models, /v1beta/models[/M]
  Probes     HEAD any path -> 200 (connectivity checks)

Anything else: 404 with a JSON error body, logged like every other request.

Test control (not logged as model traffic):
  POST /_script   body: a turn or a list of turns; appended to the queue
                  (?replace=1 replaces the queue). Returns {"queued": n}.
  GET  /_script   the pending queue
  GET  /_requests every logged request so far (JSON list, oldest first)
  POST /_reset    empties the queue and the in-memory request log
  GET  /_health   {"ok": true, "port": .., "queued": n, "requests": n}

A turn answers one model request (one HTTP call), taken from the queue in
order; with the queue empty the answer is {"text": DEFAULT_TEXT} ("ok").
Turn keys (all optional, but give at least one of text/tool/tools/error):
  "text":  str                       assistant text
  "tool":  {"name": str, "input": {...}, "id": str?}   one tool call
  "tools": [ {...}, ... ]            several tool calls in one turn
           (text, when present, comes before the tool calls)
  "delay": float                     seconds to sleep before each streamed
                                     chunk (slow answers, for interrupts)
  "chunk": int                       chars per streamed text delta (default 16)
  "items": int                       the text said as that many output items
                                     (Responses API: that many `message` items
                                     in one response, for floods of agent
                                     messages; the other APIs say it once)
  "usage": {"input_tokens": n, "output_tokens": n}   override the usage
  "stop_reason": str                 override (Anthropic names)
  "error": {"status": 400, "type": "...", "message": "..."}   answer an error
           (optional "headers": {"retry-after": "2"} are sent with it)
  "headers": {"name": "value"}       extra HTTP headers sent with the answer,
                                     whatever it is (e.g. Anthropic's
                                     anthropic-ratelimit-unified-* headers,
                                     which make a subscriber's Claude Code
                                     write rate_limit_event frames)
  "match": str                       only a request whose JSON body contains
                                     this string takes the turn; other requests
                                     skip it (e.g. opencode's parallel title
                                     request: {"match": "title generator", ...})

Usage numbers are deterministic: input_tokens = (number of characters in every
string of the system prompt, messages/input/contents and tool definitions) // 4,
output_tokens = OUTPUT_TOKENS (fixed, default 10) per turn; cache tokens are 0.
The usage served is recorded in each log entry ("usage"), so a test can sum
what the agent should report.

Every request is logged (in memory for GET /_requests, and as one JSON line
appended to --log): seq, t, method, path, api, headers, body, turn, usage,
status. Streams cut short by the client are logged with "disconnected": true.

usage: fake_llm.py [--port 0] [--host 127.0.0.1] [--log requests.jsonl]
                   [--port-file port.txt] [--script turns.json]
                   [--default-text ok] [--output-tokens 10] [--chunk-delay 0]
With --port 0 the OS picks a free port; it is printed on stdout
("fake_llm listening on 127.0.0.1:PORT") and written atomically to --port-file.
SIGTERM / SIGINT shut the server down cleanly (exit 0).

The server and its command line are here; the APIs, the state and the HTTP
plumbing are the package fake_llm_wire/ beside this file.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from http.server import ThreadingHTTPServer

# The package beside this file (also under PYTHONSAFEPATH), and no __pycache__ left
# in the checkout.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True

from fake_llm_wire.handler import Handler  # noqa: E402
from fake_llm_wire.state import State, normalize_turn  # noqa: E402


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64
    state: State  # set in main(), before serving


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="capfleet scripted fake LLM")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0 = pick a free port")
    ap.add_argument("--port-file", help="write the bound port here (atomically)")
    ap.add_argument("--log", help="append every request as a JSON line here")
    ap.add_argument("--script", help="JSON file: initial turn queue")
    ap.add_argument("--default-text", default=os.environ.get("FAKE_LLM_DEFAULT_TEXT", "ok"))
    ap.add_argument("--output-tokens", type=int, default=10)
    ap.add_argument("--chunk-delay", type=float, default=0.0,
                    help="default seconds before each streamed chunk")
    a = ap.parse_args(argv)

    state = State(a.log, a.default_text, a.output_tokens, a.chunk_delay)
    if a.script:
        with open(a.script, encoding="utf-8") as f:
            data = json.load(f)
        state.queue = [normalize_turn(t) for t in (data if isinstance(data, list) else [data])]
    srv = Server((a.host, a.port), Handler)
    srv.state = state
    state.port = srv.server_address[1]
    if a.port_file:
        tmp = f"{a.port_file}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            f.write(f"{state.port}\n")
        os.replace(tmp, a.port_file)
    print(f"fake_llm listening on {a.host}:{state.port}", flush=True)

    def stop(signum, _frame):
        threading.Thread(target=srv.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        srv.serve_forever(poll_interval=0.2)
    finally:
        srv.server_close()
    print("fake_llm stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
