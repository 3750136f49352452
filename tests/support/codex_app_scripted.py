#!/usr/bin/env python3
"""A scripted `codex app-server` (Python stdlib only), for what the real Codex
cannot do on demand: refuse requests `-32001 Server overloaded`, and hold a turn
open until it is steered.

It speaks the app-server's JSONL JSON-RPC (no `jsonrpc` member) as Codex 0.171.0
does, the few methods capfleet's binding sends:

  initialize, initialized       answered (a userAgent), ignored
  thread/start, thread/resume   one thread, `thr-scripted`
  turn/start                    the first OVERLOAD of them answered -32001; then
                                `turn/started`, the reply as an agentMessage item
                                (`echo: <prompt>`), `turn/completed`. A prompt
                                containing `wait-for-steer` holds its turn open
                                until a `turn/steer` comes (at most
                                CODEX_SCRIPTED_STEER_WAIT s, default 10), then
                                replies `steered: <steer text>`.
  turn/steer                    answered {turnId} when its expectedTurnId is the
                                open turn; else refused -32600 (no active turn)
  turn/interrupt                the open turn completes `interrupted`

Every request it reads is appended to LOG as one JSON line with the time it came
(`{"t": seconds, "method": .., "params": .., "id": ..}`), for tests to read.

Environment: CODEX_SCRIPTED_LOG (the log's path), CODEX_SCRIPTED_OVERLOAD (how many
turn/start requests to refuse, default 0), CODEX_SCRIPTED_STEER_WAIT (how long a
`wait-for-steer` turn waits, in seconds, default 10).
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time

LOG = os.environ.get("CODEX_SCRIPTED_LOG")
OVERLOAD = int(os.environ.get("CODEX_SCRIPTED_OVERLOAD", "0"))
THREAD = "thr-scripted"
STEER_WAIT = float(os.environ.get("CODEX_SCRIPTED_STEER_WAIT", "10"))

out_lock = threading.Lock()
state = {"turns": 0, "refused": 0, "open": None, "steer": None}
steered = threading.Condition()


def send(msg: dict) -> None:
    with out_lock:
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()


def log(msg: dict) -> None:
    if LOG:
        with open(LOG, "a", encoding="utf-8") as f:
            f.write(json.dumps(dict(msg, t=time.time())) + "\n")


def note(method: str, **params) -> None:
    send({"method": method, "params": params})


def text_of(params: dict) -> str:
    return "".join(i.get("text", "") for i in params.get("input") or [])


def run_turn(turn_id: str, prompt: str) -> None:
    note("turn/started", threadId=THREAD, turn={"id": turn_id, "status": "inProgress", "items": []})
    reply = f"echo: {prompt}"
    status = "completed"
    if "wait-for-steer" in prompt:
        with steered:
            steered.wait_for(lambda: state["steer"] is not None or state["open"] != turn_id,
                             timeout=STEER_WAIT)
            if state["open"] != turn_id:
                status = "interrupted"
            reply = f"steered: {state['steer']}"
    item = f"msg-{turn_id}"
    if status == "completed":
        note("item/started", threadId=THREAD, turnId=turn_id,
             item={"type": "agentMessage", "id": item, "text": ""})
        note("item/agentMessage/delta", threadId=THREAD, turnId=turn_id, itemId=item, delta=reply)
        note("item/completed", threadId=THREAD, turnId=turn_id,
             item={"type": "agentMessage", "id": item, "text": reply})
    with steered:
        if state["open"] == turn_id:
            state["open"] = None
    note("turn/completed", threadId=THREAD, turn={"id": turn_id, "status": status, "items": []})


def handle(msg: dict) -> None:
    method, params, rid = msg.get("method"), msg.get("params") or {}, msg.get("id")
    if rid is None:
        return  # a notification (initialized) or a response of ours: nothing to do
    if method == "initialize":
        send({"id": rid, "result": {"userAgent": "codex-scripted/0.171.0"}})
    elif method in ("thread/start", "thread/resume"):
        send({"id": rid, "result": {"thread": {"id": THREAD}}})
    elif method == "turn/start":
        if state["refused"] < OVERLOAD:
            state["refused"] += 1
            send({"id": rid, "error": {"code": -32001, "message": "Server overloaded; retry later."}})
            return
        state["turns"] += 1
        turn_id = f"turn-{state['turns']}"
        with steered:
            state["open"], state["steer"] = turn_id, None
        send({"id": rid, "result": {"turn": {"id": turn_id, "status": "inProgress", "items": []}}})
        threading.Thread(target=run_turn, args=(turn_id, text_of(params)), daemon=True).start()
    elif method == "turn/steer":
        with steered:
            if state["open"] is None or params.get("expectedTurnId") != state["open"]:
                send({"id": rid, "error": {"code": -32600, "message": "no active turn to steer"}})
                return
            state["steer"] = text_of(params)
            steered.notify_all()
        send({"id": rid, "result": {"turnId": params.get("expectedTurnId")}})
    elif method == "turn/interrupt":
        with steered:
            state["open"] = None
            steered.notify_all()
        send({"id": rid, "result": {}})
    else:
        send({"id": rid, "error": {"code": -32601, "message": f"method not found: {method}"}})


def main() -> int:
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        msg = json.loads(line)
        log(msg)
        handle(msg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
