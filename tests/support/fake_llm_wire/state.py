"""The fake LLM's shared, lock-protected state (the turn queue, the request log)
and the turn and usage arithmetic every API's reply uses."""
from __future__ import annotations

import itertools
import json
import threading

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

    def usage_for(self, body: dict, turn: dict) -> dict:
        u = {"input_tokens": prompt_chars(body) // 4, "output_tokens": self.output_tokens}
        u.update(turn.get("usage") or {})
        return u

    def delay(self, turn: dict) -> float:
        """Seconds before each streamed chunk of `turn`."""
        return float(turn.get("delay", self.chunk_delay) or 0)


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
    if not isinstance(t.get("headers", {}), dict):
        raise ValueError("a turn's headers are an object of header: value")
    items = t.get("items", 1)
    if not isinstance(items, int) or isinstance(items, bool) or items < 1:
        raise ValueError(f"a turn's items is a count of 1 or more, got {items!r}")
    if items > 1 and "text" not in t:
        raise ValueError("a turn's items repeat its text: give text too")
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


def chunks(text: str, size: int) -> list[str]:
    size = max(1, int(size or CHUNK_CHARS))
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def text_chunks(turn: dict) -> list[str]:
    """The turn's text in streamed deltas (its "chunk" chars each)."""
    return chunks(turn["text"], turn.get("chunk", CHUNK_CHARS))
