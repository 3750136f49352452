"""OpenAI's two APIs: Chat Completions (`POST /v1/chat/completions`, tool_calls, the
usage chunk on `stream_options.include_usage`) and Responses (`POST /v1/responses`,
its typed SSE events)."""
from __future__ import annotations

import itertools
import json
import time
from typing import TYPE_CHECKING

from .state import chunks, text_chunks

if TYPE_CHECKING:
    from .handler import Handler


def openai_chat_reply(h: Handler, body: dict, turn: dict, usage: dict):
    st = h.state
    cid = st.next_id("chatcmpl-fake")
    model = body.get("model") or "fake-model"
    now = int(time.time())
    calls = [{"id": tc.get("id") or st.next_id("call_fake"), "type": "function",
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
    delay = st.delay(turn)
    base = {"id": cid, "object": "chat.completion.chunk", "created": now, "model": model}

    def chunk(delta, finish_reason=None):
        h._sse(None, dict(base, choices=[{"index": 0, "delta": delta,
                                          "finish_reason": finish_reason}]), delay)

    h._sse_begin()
    chunk({"role": "assistant", "content": ""})
    if "text" in turn:
        for piece in text_chunks(turn):
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


def openai_responses_reply(h: Handler, body: dict, turn: dict, usage: dict):
    st = h.state
    rid = st.next_id("resp_fake")
    model = body.get("model") or "fake-model"
    items = []
    for _ in range(turn.get("items", 1) if "text" in turn else 0):
        items.append({"type": "message", "id": st.next_id("msg_fake"), "status": "completed",
                      "role": "assistant",
                      "content": [{"type": "output_text", "text": turn["text"], "annotations": []}]})
    for tc in turn["tools"]:
        items.append({"type": "function_call", "id": st.next_id("fc_fake"), "status": "completed",
                      "call_id": tc.get("id") or st.next_id("call_fake"), "name": tc["name"],
                      "arguments": json.dumps(tc["input"])})
    u = {"input_tokens": usage["input_tokens"], "input_tokens_details": {"cached_tokens": 0},
         "output_tokens": usage["output_tokens"], "output_tokens_details": {"reasoning_tokens": 0},
         "total_tokens": usage["input_tokens"] + usage["output_tokens"]}
    resp = {"id": rid, "object": "response", "created_at": int(time.time()), "model": model,
            "status": "completed", "output": items, "usage": u, "error": None,
            "incomplete_details": None}
    if not body.get("stream"):
        return h._send_json(resp)
    delay = st.delay(turn)
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
            for piece in text_chunks(turn):
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
