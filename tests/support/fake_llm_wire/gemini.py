"""Gemini's generateContent (`POST /v1beta/models/M:generateContent`) and its stream
(`:streamGenerateContent`, SSE with `?alt=sse`, else one JSON array written
incrementally)."""
from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from .state import text_chunks

if TYPE_CHECKING:
    from .handler import Handler


def gemini_reply(h: Handler, body: dict, turn: dict, usage: dict):
    st = h.state
    stream = ":streamGenerateContent" in h.path
    sse = "alt=sse" in (urlsplit(h.path).query or "")
    model = h.path.split("/models/")[-1].split(":")[0] if "/models/" in h.path else "gemini-2.5-flash"
    rid = st.next_id("resp_fake")
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
    delay = st.delay(turn)
    frames = []
    if "text" in turn:
        frames += [[{"text": piece}] for piece in text_chunks(turn)]
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
