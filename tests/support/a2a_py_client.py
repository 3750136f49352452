"""An A2A client on the official Python SDK (a2a-sdk 1.3.0, peer `a2a-py`), for
capfleet's tests of `capfleet serve --expose`.

usage: a2a_py_client.py --url BASE [--token T] [--spelling 1.0|0.3] [--extension]
                        [--answer DECISION] [--get] PROMPT...

It resolves the agent card at BASE/.well-known/agent-card.json (with the bearer
token, if given), keeps only the card's JSON-RPC interface of `--spelling` (the
SDK then speaks that spelling: 1.0 natively, 0.3 through its compat transport),
and sends each PROMPT as a streaming message, all in one context (the first
task's). `--extension` activates the `cap-protocol/v1` extension (the
A2A-Extensions header). When a stream ends with the task in `input-required`,
the client answers with `--answer` (a decision: allow_once, allow_always, deny)
as a data part marked `cap.permission.response` for the request the task
carries (or as text without `--extension`), and streams on. After each turn,
with `--get`, it reads the task back with GetTask.

Output: NDJSON on stdout, the same shape as a2a_js_client.mjs prints: one line
per stream response {"turn": i, "kind": "task"|"status"|"artifact"|"message",
"task": ID, "context": ID, "state": "working"|"input-required"|...,
"texts": [...], "data": [...]}, per answer {"turn": i, "answered": REQUEST},
per GetTask {"turn": i, "got": {"state": ..., "texts": [...history text...],
"artifacts": N}}.
"""

import argparse
import asyncio
import json
import sys

import httpx
from a2a.client import A2ACardResolver, ClientCallContext, ClientConfig, create_client
from a2a.client.service_parameters import ServiceParametersFactory, with_a2a_extensions
from a2a.helpers.proto_helpers import new_data_part, new_text_part
from a2a.types.a2a_pb2 import GetTaskRequest, Message, Role, SendMessageRequest
from google.protobuf.json_format import MessageToDict

CAP = "cap-protocol/v1"


def out(obj):
    print(json.dumps(obj), flush=True)


def norm_state(s):
    return s.removeprefix("TASK_STATE_").lower().replace("_", "-") if s else None


def parts_of(parts):
    texts = [p["text"] for p in parts if "text" in p]
    data = [p["data"] for p in parts if "data" in p]
    return texts, data


def summary(event):
    """One stream response, normalized."""
    d = MessageToDict(event)
    kinds = {"task": "task", "statusUpdate": "status", "artifactUpdate": "artifact", "message": "message"}
    kind = next(k for k in kinds if k in d)
    obj = d[kind]
    if kind == "artifactUpdate":
        parts, state = obj.get("artifact", {}).get("parts", []), None
    elif kind == "message":
        parts, state = obj.get("parts", []), None
    else:
        status = obj.get("status", {})
        parts, state = status.get("message", {}).get("parts", []), norm_state(status.get("state"))
    texts, data = parts_of(parts)
    return {"kind": kinds[kind], "task": obj.get("id") or obj.get("taskId"),
            "context": obj.get("contextId"), "state": state, "texts": texts, "data": data}


def permission_request(data):
    return next((d for d in data if isinstance(d, dict)
                 and d.get("_meta", {}).get("cap.kind") == "cap.permission.request"), None)


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--token")
    ap.add_argument("--spelling", choices=["1.0", "0.3"], default="1.0")
    ap.add_argument("--extension", action="store_true")
    ap.add_argument("--answer", default="allow_once")
    ap.add_argument("--get", action="store_true")
    ap.add_argument("prompts", nargs="+")
    args = ap.parse_args()
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    async with httpx.AsyncClient(headers=headers, timeout=120) as http:
        card = await A2ACardResolver(http, args.url).get_agent_card()
        keep = [i for i in card.supported_interfaces
                if i.protocol_binding == "JSONRPC" and i.protocol_version.startswith(args.spelling)]
        if not keep:
            sys.exit(f"the card offers no JSON-RPC {args.spelling} interface: {card}")
        chosen = type(keep[0])()
        chosen.CopyFrom(keep[0])
        del card.supported_interfaces[:]
        card.supported_interfaces.add().CopyFrom(chosen)
        client = await create_client(card, client_config=ClientConfig(streaming=True, httpx_client=http))
        params = ServiceParametersFactory.create([with_a2a_extensions([CAP])] if args.extension else [])
        ctx = ClientCallContext(service_parameters=params)
        context_id = None
        for turn, prompt in enumerate(args.prompts):
            message = Message(role=Role.ROLE_USER, message_id=f"m-{turn}", parts=[new_text_part(prompt)])
            if context_id:
                message.context_id = context_id
            task_id = None
            while True:
                last = {}
                async for event in client.send_message(SendMessageRequest(message=message), context=ctx):
                    ev = summary(event)
                    out(dict(ev, turn=turn))
                    task_id = ev["task"] or task_id
                    context_id = ev["context"] or context_id
                    if ev["state"]:
                        last = ev
                if last.get("state") != "input-required":
                    break
                request = permission_request(last["data"])
                out({"turn": turn, "answered": request})
                if request and args.extension:
                    part = new_data_part({"_meta": {"cap.kind": "cap.permission.response"},
                                          "req_id": request["req_id"], "decision": args.answer})
                else:
                    part = new_text_part(args.answer)
                message = Message(role=Role.ROLE_USER, message_id=f"m-{turn}-answer",
                                  task_id=task_id, context_id=context_id, parts=[part])
            if args.get and task_id:
                task = MessageToDict(await client.get_task(GetTaskRequest(id=task_id), context=ctx))
                texts = [t for m in task.get("history", []) for t in parts_of(m.get("parts", []))[0]]
                out({"turn": turn, "got": {"state": norm_state(task["status"]["state"]), "texts": texts,
                                           "artifacts": len(task.get("artifacts", []))}})
        await client.close()


if __name__ == "__main__":
    asyncio.run(main())
