"""The fake LLM's HTTP handler: request bodies (chunked, gzip, deflate), JSON and SSE
replies, the routes of each API and the test-control routes (`/_script`,
`/_requests`, `/_reset`, `/_health`), every request logged in the server's state."""
from __future__ import annotations

import gzip
import json
import time
import zlib
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

from .anthropic import anthropic_reply
from .gemini import gemini_reply
from .models import error_body, gemini_model_obj, model_obj
from .openai import openai_chat_reply, openai_responses_reply
from .state import State, normalize_turn, prompt_chars


class ClientGone(Exception):
    pass


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "capfleet-fake-llm/1"
    # The running model answer's extra headers (its turn's "headers"), else none.
    answer_headers: dict = {}

    @property
    def state(self) -> State:
        return self.server.state

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
        for k, v in (self.answer_headers if headers is None else headers).items():
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
        for k, v in self.answer_headers.items():
            self.send_header(k, str(v))
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

    def _record_ok(self, method, body=None, api=None):
        """Log a request answered 200 that takes no turn (listings, token counts)."""
        entry = self._entry(method, body, api=api)
        entry["status"] = 200
        self.state.record(entry)

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
                self.state.record(self._entry(self.command, api="internal-error") | {"error": repr(e)})
                self._send_json({"error": {"type": "fake_llm_internal", "message": repr(e)}}, 500)
            except Exception:  # noqa: BLE001
                pass

    def _not_found(self, method, body):
        entry = self._entry(method, body, api="unknown")
        entry["status"] = 404
        self.state.record(entry)
        self._send_json({"type": "error", "error": {"type": "not_found_error",
                         "message": f"fake_llm: no route {method} {urlsplit(self.path).path}"}}, 404)

    # -- GET -----------------------------------------------------------------
    def _get(self):
        st = self.state
        p = urlsplit(self.path).path.rstrip("/")
        if p == "/_requests":
            with st.lock:
                return self._send_json(list(st.requests))
        if p == "/_script":
            with st.lock:
                return self._send_json(list(st.queue))
        if p == "/_health":
            with st.lock:
                return self._send_json({"ok": True, "port": st.port, "queued": len(st.queue),
                                        "requests": len(st.requests)})
        if p in ("/v1/models", "/models", "/v1/v1/models"):
            self._record_ok("GET", api="models")
            data = [model_obj(m) for m in ("claude-sonnet-4-5", "claude-haiku-4-5",
                                           "fake-model", "gpt-5", "gemini-2.5-flash")]
            return self._send_json({"object": "list", "data": data, "has_more": False,
                                    "first_id": data[0]["id"], "last_id": data[-1]["id"]})
        if p.startswith("/v1/models/"):
            self._record_ok("GET", api="models")
            return self._send_json(model_obj(p[len("/v1/models/"):]))
        if p in ("/v1beta/models", "/v1/models") or p.startswith("/v1beta/models/"):
            self._record_ok("GET", api="models")
            names = ["gemini-2.5-flash", "gemini-2.5-pro", "gemini-2.5-flash-lite"]
            if p.startswith("/v1beta/models/"):
                return self._send_json(gemini_model_obj(p.split("/")[-1]))
            return self._send_json({"models": [gemini_model_obj(n) for n in names]})
        self._not_found("GET", None)

    # -- POST ----------------------------------------------------------------
    def _post(self):
        st = self.state
        body = self._read_body()
        u = urlsplit(self.path)
        p = u.path.rstrip("/")
        if p == "/_script":
            try:
                turns = body if isinstance(body, list) else [body]
                turns = [normalize_turn(t) for t in turns]
            except ValueError as e:
                return self._send_json({"ok": False, "error": str(e)}, 400)
            with st.lock:
                if parse_qs(u.query).get("replace", ["0"])[0] not in ("0", ""):
                    st.queue.clear()
                st.queue.extend(turns)
                n = len(st.queue)
            return self._send_json({"ok": True, "queued": n})
        if p == "/_reset":
            with st.lock:
                st.queue.clear()
                st.requests.clear()
            return self._send_json({"ok": True})

        body = body if isinstance(body, dict) else {}
        if p.endswith("/messages/count_tokens"):
            self._record_ok("POST", body, api="anthropic.count_tokens")
            return self._send_json({"input_tokens": prompt_chars(body) // 4})
        if ":countTokens" in p:
            self._record_ok("POST", body, api="gemini.countTokens")
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
        st = self.state
        turn = st.next_turn(body)
        usage = st.usage_for(body, turn)
        entry = self._entry("POST", body, api=api)
        entry.update(turn=turn, usage=usage, status=(turn.get("error") or {}).get("status", 200))
        st.record(entry)
        self.answer_headers = turn.get("headers") or {}
        try:
            if turn.get("error"):
                err = turn["error"]
                headers = {**self.answer_headers, **(err.get("headers") or {})}
                return self._send_json(error_body(api, err), int(err.get("status", 500)), headers)
            fn(self, body, turn, usage)
        except ClientGone:
            st.note(entry, disconnected=True)
            raise
        finally:
            self.answer_headers = {}
