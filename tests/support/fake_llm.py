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
  "usage": {"input_tokens": n, "output_tokens": n}   override the usage
  "stop_reason": str                 override (Anthropic names)
  "error": {"status": 400, "type": "...", "message": "..."}   answer an error
           (optional "headers": {"retry-after": "2"} are sent with it)
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
"""
from __future__ import annotations

import argparse
import gzip
import itertools
import json
import os
import signal
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

CHUNK_CHARS = 16


class State:
    """Shared, lock-protected server state."""

    def __init__(self, log_path: str | None, default_text: str, output_tokens: int,
                 chunk_delay: float):
        self.lock = threading.Lock()
        self.queue: list[dict] = []
        self.requests: list[dict] = []
        self.seq = itertools.count(1)
        self.ids = itertools.count(1)
        self.log_path = log_path
        self.default_text = default_text
        self.output_tokens = output_tokens
        self.chunk_delay = chunk_delay
        self.port = 0

    def next_id(self, prefix: str) -> str:
        with self.lock:
            return f"{prefix}{next(self.ids):04d}"

    def next_turn(self, body: dict | None = None) -> dict:
        """First queued turn this request may take: a turn with "match" only
        answers a request whose JSON body contains that string."""
        text = None
        with self.lock:
            for i, t in enumerate(self.queue):
                if "match" in t:
                    if text is None:
                        text = json.dumps(body or {}, ensure_ascii=False)
                    if t["match"] not in text:
                        continue
                return self.queue.pop(i)
        return {"text": self.default_text, "tools": []}

    def record(self, entry: dict) -> None:
        with self.lock:
            entry["seq"] = next(self.seq)
            self.requests.append(entry)
            if self.log_path:
                with open(self.log_path, "a", encoding="utf-8") as f:
                    f.write(json.dumps(entry, sort_keys=True) + "\n")

    def note(self, entry: dict, **kv) -> None:
        """Amend an entry already recorded (e.g. a client disconnect)."""
        with self.lock:
            entry.update(kv)
            if self.log_path:
                with open(self.log_path, "a", encoding="utf-8") as f:
                    f.write(json.dumps({"seq": entry.get("seq"), "amend": kv}, sort_keys=True) + "\n")


STATE: State  # set in main()


# ---------------------------------------------------------------- helpers ---

def normalize_turn(turn) -> dict:
    if isinstance(turn, str):
        turn = {"text": turn}
    if not isinstance(turn, dict):
        raise ValueError(f"a turn must be an object or a string, got {type(turn).__name__}")
    t = dict(turn)
    tools = list(t.pop("tools", None) or [])
    if "tool" in t:
        tools.insert(0, t.pop("tool"))
    for tc in tools:
        if not isinstance(tc, dict) or "name" not in tc:
            raise ValueError("a tool call needs a name")
        tc.setdefault("input", {})
    t["tools"] = tools
    if not tools and "text" not in t and "error" not in t:
        raise ValueError("a turn needs text, tool, tools or error")
    return t


def string_chars(obj) -> int:
    if isinstance(obj, str):
        return len(obj)
    if isinstance(obj, dict):
        return sum(string_chars(v) for v in obj.values())
    if isinstance(obj, list):
        return sum(string_chars(v) for v in obj)
    return 0


def prompt_chars(body: dict) -> int:
    keys = ("system", "messages", "input", "instructions", "contents",
            "systemInstruction", "system_instruction", "tools", "prompt")
    return sum(string_chars(body.get(k)) for k in keys)


def usage_for(body: dict, turn: dict) -> dict:
    u = {"input_tokens": prompt_chars(body) // 4, "output_tokens": STATE.output_tokens}
    u.update(turn.get("usage") or {})
    return u


def chunks(text: str, size: int) -> list[str]:
    size = max(1, int(size or CHUNK_CHARS))
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


class ClientGone(Exception):
    pass


# ---------------------------------------------------------------- handler ---

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "capfleet-fake-llm/1"

    def log_message(self, *args):  # keep stderr quiet; everything goes to the log
        pass

    # -- plumbing ------------------------------------------------------------
    def _read_body(self):
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            raw = b""
            while True:
                line = self.rfile.readline()
                n = int(line.split(b";")[0].strip() or b"0", 16)
                if n == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                raw += self.rfile.read(n)
                self.rfile.readline()
        else:
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n) if n else b""
        enc = (self.headers.get("Content-Encoding") or "").lower()
        try:
            if enc == "gzip":
                raw = gzip.decompress(raw)
            elif enc == "deflate":
                raw = zlib.decompress(raw)
            elif enc:
                return {"_undecoded_content_encoding": enc, "_len": len(raw)}
        except Exception as e:  # noqa: BLE001
            return {"_decode_error": str(e)}
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return {"_raw": raw[:4000].decode("utf-8", "replace")}

    def _send_json(self, obj, code=200, headers=None):
        data = json.dumps(obj).encode()
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, str(v))
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _sse_begin(self, content_type="text/event-stream"):
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _write_chunk(self, data: bytes):
        try:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError) as e:
            raise ClientGone() from e

    def _sse(self, event: str | None, obj, delay: float = 0.0):
        if delay:
            time.sleep(delay)
        s = (f"event: {event}\n" if event else "") + "data: " + json.dumps(obj) + "\n\n"
        self._write_chunk(s.encode())

    def _sse_end(self):
        self._write_chunk(b"")  # zero-length chunk terminates the body

    def _entry(self, method, body=None, api=None):
        u = urlsplit(self.path)
        return {"t": round(time.time(), 3), "method": method, "path": u.path,
                "query": u.query, "api": api,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": body}

    # -- verbs ---------------------------------------------------------------
    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        self._safe(self._get)

    def do_POST(self):
        self._safe(self._post)

    def do_PUT(self):
        self._safe(lambda: self._not_found("PUT", self._read_body()))

    def do_DELETE(self):
        self._safe(lambda: self._not_found("DELETE", None))

    def _safe(self, fn):
        try:
            fn()
        except ClientGone:
            self.close_connection = True
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.close_connection = True
        except Exception as e:  # noqa: BLE001 - never crash the server
            self.close_connection = True
            try:
                STATE.record(self._entry(self.command, api="internal-error") | {"error": repr(e)})
                self._send_json({"error": {"type": "fake_llm_internal", "message": repr(e)}}, 500)
            except Exception:  # noqa: BLE001
                pass

    def _not_found(self, method, body):
        entry = self._entry(method, body, api="unknown")
        entry["status"] = 404
        STATE.record(entry)
        self._send_json({"type": "error", "error": {"type": "not_found_error",
                         "message": f"fake_llm: no route {method} {urlsplit(self.path).path}"}}, 404)

    # -- GET -----------------------------------------------------------------
    def _get(self):
        p = urlsplit(self.path).path.rstrip("/")
        if p == "/_requests":
            with STATE.lock:
                return self._send_json(list(STATE.requests))
        if p == "/_script":
            with STATE.lock:
                return self._send_json(list(STATE.queue))
        if p == "/_health":
            with STATE.lock:
                return self._send_json({"ok": True, "port": STATE.port, "queued": len(STATE.queue),
                                        "requests": len(STATE.requests)})
        entry = self._entry("GET", api="models")
        if p in ("/v1/models", "/models", "/v1/v1/models"):
            entry["status"] = 200
            STATE.record(entry)
            data = [model_obj(m) for m in ("claude-sonnet-4-5", "claude-haiku-4-5",
                                           "fake-model", "gpt-5", "gemini-2.5-flash")]
            return self._send_json({"object": "list", "data": data, "has_more": False,
                                    "first_id": data[0]["id"], "last_id": data[-1]["id"]})
        if p.startswith("/v1/models/"):
            entry["status"] = 200
            STATE.record(entry)
            return self._send_json(model_obj(p[len("/v1/models/"):]))
        if p in ("/v1beta/models", "/v1/models") or p.startswith("/v1beta/models/"):
            entry["status"] = 200
            STATE.record(entry)
            names = ["gemini-2.5-flash", "gemini-2.5-pro", "gemini-2.5-flash-lite"]
            if p.startswith("/v1beta/models/"):
                return self._send_json(gemini_model_obj(p.split("/")[-1]))
            return self._send_json({"models": [gemini_model_obj(n) for n in names]})
        self._not_found("GET", None)

    # -- POST ----------------------------------------------------------------
    def _post(self):
        body = self._read_body()
        u = urlsplit(self.path)
        p = u.path.rstrip("/")
        if p == "/_script":
            try:
                turns = body if isinstance(body, list) else [body]
                turns = [normalize_turn(t) for t in turns]
            except ValueError as e:
                return self._send_json({"ok": False, "error": str(e)}, 400)
            with STATE.lock:
                if parse_qs(u.query).get("replace", ["0"])[0] not in ("0", ""):
                    STATE.queue.clear()
                STATE.queue.extend(turns)
                n = len(STATE.queue)
            return self._send_json({"ok": True, "queued": n})
        if p == "/_reset":
            with STATE.lock:
                STATE.queue.clear()
                STATE.requests.clear()
            return self._send_json({"ok": True})

        body = body if isinstance(body, dict) else {}
        if p.endswith("/messages/count_tokens"):
            entry = self._entry("POST", body, api="anthropic.count_tokens")
            entry["status"] = 200
            STATE.record(entry)
            return self._send_json({"input_tokens": prompt_chars(body) // 4})
        if ":countTokens" in p:
            entry = self._entry("POST", body, api="gemini.countTokens")
            entry["status"] = 200
            STATE.record(entry)
            return self._send_json({"totalTokens": prompt_chars(body) // 4})
        if p.endswith("/messages"):
            return self._model_call("anthropic", body, anthropic_reply)
        if p.endswith("/chat/completions"):
            return self._model_call("openai.chat", body, openai_chat_reply)
        if p.endswith("/responses"):
            return self._model_call("openai.responses", body, openai_responses_reply)
        if ":streamGenerateContent" in p or ":generateContent" in p:
            return self._model_call("gemini", body, gemini_reply)
        self._not_found("POST", body)

    def _model_call(self, api, body, fn):
        turn = STATE.next_turn(body)
        usage = usage_for(body, turn)
        entry = self._entry("POST", body, api=api)
        entry.update(turn=turn, usage=usage, status=(turn.get("error") or {}).get("status", 200))
        STATE.record(entry)
        if turn.get("error"):
            err = turn["error"]
            return self._send_json(error_body(api, err), int(err.get("status", 500)), err.get("headers"))
        try:
            fn(self, body, turn, usage)
        except ClientGone:
            STATE.note(entry, disconnected=True)
            raise


# ------------------------------------------------------------ model lists ---

def model_obj(mid: str) -> dict:
    # A union of the Anthropic and OpenAI model-object shapes.
    return {"id": mid, "object": "model", "type": "model", "created": 1735689600,
            "owned_by": "capfleet-fake", "display_name": mid,
            "created_at": "2025-01-01T00:00:00Z"}


def gemini_model_obj(name: str) -> dict:
    return {"name": f"models/{name}", "version": "001", "displayName": name,
            "inputTokenLimit": 1048576, "outputTokenLimit": 65536,
            "supportedGenerationMethods": ["generateContent", "countTokens", "streamGenerateContent"]}


def error_body(api: str, err: dict) -> dict:
    msg = err.get("message", "scripted error")
    if api == "anthropic":
        return {"type": "error", "error": {"type": err.get("type", "api_error"), "message": msg}}
    if api == "gemini":
        return {"error": {"code": err.get("status", 500), "message": msg,
                          "status": err.get("type", "INTERNAL")}}
    return {"error": {"message": msg, "type": err.get("type", "server_error"), "code": None}}


# -------------------------------------------------------------- Anthropic ---

def anthropic_reply(h: Handler, body: dict, turn: dict, usage: dict):
    mid = STATE.next_id("msg_fake")
    model = body.get("model") or "claude-sonnet-4-5"
    blocks = []
    if "text" in turn:
        blocks.append({"type": "text", "text": turn["text"]})
    for tc in turn["tools"]:
        blocks.append({"type": "tool_use", "id": tc.get("id") or STATE.next_id("toolu_fake"),
                       "name": tc["name"], "input": tc["input"]})
    stop = turn.get("stop_reason") or ("tool_use" if turn["tools"] else "end_turn")
    full_usage = {"input_tokens": usage["input_tokens"], "output_tokens": usage["output_tokens"],
                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
                  "service_tier": "standard"}
    if not body.get("stream"):
        return h._send_json({"id": mid, "type": "message", "role": "assistant", "model": model,
                             "content": blocks, "stop_reason": stop, "stop_sequence": None,
                             "usage": full_usage})
    delay = float(turn.get("delay", STATE.chunk_delay) or 0)
    h._sse_begin()
    h._sse("message_start", {"type": "message_start", "message": {
        "id": mid, "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None,
        "usage": dict(full_usage, output_tokens=1)}})
    h._sse("ping", {"type": "ping"})
    for i, b in enumerate(blocks):
        if b["type"] == "text":
            h._sse("content_block_start", {"type": "content_block_start", "index": i,
                                           "content_block": {"type": "text", "text": ""}})
            for piece in chunks(b["text"], turn.get("chunk", CHUNK_CHARS)):
                h._sse("content_block_delta", {"type": "content_block_delta", "index": i,
                                               "delta": {"type": "text_delta", "text": piece}}, delay)
        else:
            h._sse("content_block_start", {"type": "content_block_start", "index": i,
                                           "content_block": dict(b, input={})})
            for piece in chunks(json.dumps(b["input"]), 32):
                h._sse("content_block_delta", {"type": "content_block_delta", "index": i,
                                               "delta": {"type": "input_json_delta",
                                                         "partial_json": piece}}, delay)
        h._sse("content_block_stop", {"type": "content_block_stop", "index": i})
    h._sse("message_delta", {"type": "message_delta",
                             "delta": {"stop_reason": stop, "stop_sequence": None},
                             "usage": {"input_tokens": usage["input_tokens"],
                                       "output_tokens": usage["output_tokens"],
                                       "cache_creation_input_tokens": 0,
                                       "cache_read_input_tokens": 0}})
    h._sse("message_stop", {"type": "message_stop"})
    h._sse_end()


# ------------------------------------------------------ OpenAI chat compl. ---

def openai_chat_reply(h: Handler, body: dict, turn: dict, usage: dict):
    cid = STATE.next_id("chatcmpl-fake")
    model = body.get("model") or "fake-model"
    now = int(time.time())
    calls = [{"id": tc.get("id") or STATE.next_id("call_fake"), "type": "function",
              "function": {"name": tc["name"], "arguments": json.dumps(tc["input"])}}
             for tc in turn["tools"]]
    finish = "tool_calls" if calls else "stop"
    u = {"prompt_tokens": usage["input_tokens"], "completion_tokens": usage["output_tokens"],
         "total_tokens": usage["input_tokens"] + usage["output_tokens"]}
    if not body.get("stream"):
        msg = {"role": "assistant", "content": turn.get("text")}
        if calls:
            msg["tool_calls"] = calls
        return h._send_json({"id": cid, "object": "chat.completion", "created": now, "model": model,
                             "choices": [{"index": 0, "message": msg, "finish_reason": finish,
                                          "logprobs": None}],
                             "usage": u})
    delay = float(turn.get("delay", STATE.chunk_delay) or 0)
    base = {"id": cid, "object": "chat.completion.chunk", "created": now, "model": model}

    def chunk(delta, finish_reason=None):
        h._sse(None, dict(base, choices=[{"index": 0, "delta": delta,
                                          "finish_reason": finish_reason}]), delay)

    h._sse_begin()
    chunk({"role": "assistant", "content": ""})
    if "text" in turn:
        for piece in chunks(turn["text"], turn.get("chunk", CHUNK_CHARS)):
            chunk({"content": piece})
    for i, c in enumerate(calls):
        chunk({"tool_calls": [{"index": i, "id": c["id"], "type": "function",
                               "function": {"name": c["function"]["name"], "arguments": ""}}]})
        for piece in chunks(c["function"]["arguments"], 32):
            chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
    chunk({}, finish)
    if (body.get("stream_options") or {}).get("include_usage"):
        h._sse(None, dict(base, choices=[], usage=u))
    h._write_chunk(b"data: [DONE]\n\n")
    h._sse_end()


# ---------------------------------------------------------- OpenAI Responses ---

def openai_responses_reply(h: Handler, body: dict, turn: dict, usage: dict):
    rid = STATE.next_id("resp_fake")
    model = body.get("model") or "fake-model"
    items = []
    if "text" in turn:
        items.append({"type": "message", "id": STATE.next_id("msg_fake"), "status": "completed",
                      "role": "assistant",
                      "content": [{"type": "output_text", "text": turn["text"], "annotations": []}]})
    for tc in turn["tools"]:
        items.append({"type": "function_call", "id": STATE.next_id("fc_fake"), "status": "completed",
                      "call_id": tc.get("id") or STATE.next_id("call_fake"), "name": tc["name"],
                      "arguments": json.dumps(tc["input"])})
    u = {"input_tokens": usage["input_tokens"], "input_tokens_details": {"cached_tokens": 0},
         "output_tokens": usage["output_tokens"], "output_tokens_details": {"reasoning_tokens": 0},
         "total_tokens": usage["input_tokens"] + usage["output_tokens"]}
    resp = {"id": rid, "object": "response", "created_at": int(time.time()), "model": model,
            "status": "completed", "output": items, "usage": u, "error": None,
            "incomplete_details": None}
    if not body.get("stream"):
        return h._send_json(resp)
    delay = float(turn.get("delay", STATE.chunk_delay) or 0)
    seq = itertools.count()

    def ev(name, **fields):
        h._sse(name, dict(fields, type=name, sequence_number=next(seq)), delay)

    h._sse_begin()
    pending = dict(resp, status="in_progress", output=[], usage=None)
    ev("response.created", response=pending)
    ev("response.in_progress", response=pending)
    for oi, it in enumerate(items):
        if it["type"] == "message":
            text = it["content"][0]["text"]
            ev("response.output_item.added", output_index=oi,
               item=dict(it, status="in_progress", content=[]))
            ev("response.content_part.added", output_index=oi, item_id=it["id"], content_index=0,
               part={"type": "output_text", "text": "", "annotations": []})
            for piece in chunks(text, turn.get("chunk", CHUNK_CHARS)):
                ev("response.output_text.delta", output_index=oi, item_id=it["id"],
                   content_index=0, delta=piece)
            ev("response.output_text.done", output_index=oi, item_id=it["id"], content_index=0,
               text=text)
            ev("response.content_part.done", output_index=oi, item_id=it["id"], content_index=0,
               part=it["content"][0])
        else:
            ev("response.output_item.added", output_index=oi,
               item=dict(it, status="in_progress", arguments=""))
            ev("response.function_call_arguments.delta", output_index=oi, item_id=it["id"],
               delta=it["arguments"])
            ev("response.function_call_arguments.done", output_index=oi, item_id=it["id"],
               arguments=it["arguments"])
        ev("response.output_item.done", output_index=oi, item=it)
    ev("response.completed", response=resp)
    h._sse_end()


# ------------------------------------------------------------------ Gemini ---

def gemini_reply(h: Handler, body: dict, turn: dict, usage: dict):
    stream = ":streamGenerateContent" in h.path
    sse = "alt=sse" in (urlsplit(h.path).query or "")
    model = h.path.split("/models/")[-1].split(":")[0] if "/models/" in h.path else "gemini-2.5-flash"
    rid = STATE.next_id("resp_fake")
    calls = [{"functionCall": {"name": tc["name"], "args": tc["input"],
                               **({"id": tc["id"]} if tc.get("id") else {})}}
             for tc in turn["tools"]]
    meta = {"promptTokenCount": usage["input_tokens"], "candidatesTokenCount": usage["output_tokens"],
            "totalTokenCount": usage["input_tokens"] + usage["output_tokens"]}

    def resp(parts, finish=None, with_usage=False):
        cand = {"content": {"role": "model", "parts": parts}, "index": 0}
        if finish:
            cand["finishReason"] = finish
        r = {"candidates": [cand], "modelVersion": model, "responseId": rid}
        if with_usage:
            r["usageMetadata"] = meta
        return r

    if not stream:
        parts = ([{"text": turn["text"]}] if "text" in turn else []) + calls
        return h._send_json(resp(parts, "STOP", True))
    delay = float(turn.get("delay", STATE.chunk_delay) or 0)
    frames = []
    if "text" in turn:
        frames += [[{"text": piece}] for piece in chunks(turn["text"], turn.get("chunk", CHUNK_CHARS))]
    frames += [[c] for c in calls]
    if sse:
        h._sse_begin()
        for i, parts in enumerate(frames):
            last = i == len(frames) - 1
            h._sse(None, resp(parts, "STOP" if last else None, last), delay)
        return h._sse_end()
    # Without alt=sse the stream is one JSON array, written incrementally.
    h._sse_begin("application/json")
    for i, parts in enumerate(frames):
        last = i == len(frames) - 1
        if delay:
            time.sleep(delay)
        h._write_chunk((("[" if i == 0 else ",\r\n") +
                        json.dumps(resp(parts, "STOP" if last else None, last))).encode())
    h._write_chunk(b"]")
    h._sse_end()


# -------------------------------------------------------------------- main ---

class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64


def main(argv=None) -> int:
    global STATE
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

    STATE = State(a.log, a.default_text, a.output_tokens, a.chunk_delay)
    if a.script:
        with open(a.script, encoding="utf-8") as f:
            data = json.load(f)
        STATE.queue = [normalize_turn(t) for t in (data if isinstance(data, list) else [data])]
    srv = Server((a.host, a.port), Handler)
    STATE.port = srv.server_address[1]
    if a.port_file:
        tmp = f"{a.port_file}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            f.write(f"{STATE.port}\n")
        os.replace(tmp, a.port_file)
    print(f"fake_llm listening on {a.host}:{STATE.port}", flush=True)

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
