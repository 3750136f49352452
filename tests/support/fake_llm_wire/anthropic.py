"""Anthropic's Messages API (`POST /v1/messages`): one turn as a message, or as its
SSE stream (text deltas, tool_use blocks with input_json deltas)."""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

from .state import chunks, text_chunks

if TYPE_CHECKING:
    from .handler import Handler


def anthropic_reply(h: Handler, body: dict, turn: dict, usage: dict):
    st = h.state
    mid = st.next_id("msg_fake")
    model = body.get("model") or "claude-sonnet-4-5"
    blocks = []
    if "text" in turn:
        blocks.append({"type": "text", "text": turn["text"]})
    for tc in turn["tools"]:
        blocks.append({"type": "tool_use", "id": tc.get("id") or st.next_id("toolu_fake"),
                       "name": tc["name"], "input": tc["input"]})
    stop = turn.get("stop_reason") or ("tool_use" if turn["tools"] else "end_turn")
    full_usage = {"input_tokens": usage["input_tokens"], "output_tokens": usage["output_tokens"],
                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
                  "service_tier": "standard"}
    if not body.get("stream"):
        return h._send_json({"id": mid, "type": "message", "role": "assistant", "model": model,
                             "content": blocks, "stop_reason": stop, "stop_sequence": None,
                             "usage": full_usage})
    delay = st.delay(turn)
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
            for piece in text_chunks(turn):
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
