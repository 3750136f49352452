"""An A2A client on the official Python SDK (a2a-sdk 1.3.0, peer `a2a-py`), for
capfleet's tests of `capfleet serve --expose`.

usage: a2a_py_client.py --url BASE [--token T] [--spelling 1.0|0.3] [--extension]
                        [--answer DECISION] [--get] PROMPT...
       a2a_py_client.py --url BASE [--token T] --conformance

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

`--conformance` instead sends, through the SDK's own client API, the requests of
A2A 1.0's rules (issue 35) a plain client (no extension) can send, against an agent
playing the suite's sim script (a "slow" turn that sleeps), and prints one line per
check {"check": NAME, ...what was seen}: an SDK error as {"error": its class name,
"code": its JSON-RPC code}. The test judges the lines; the script only observes.
"""

import argparse
import asyncio
import json
import sys
import time

import httpx
from a2a.client import A2ACardResolver, ClientCallContext, ClientConfig, create_client
from a2a.client.service_parameters import ServiceParametersFactory, with_a2a_extensions
from a2a.helpers.proto_helpers import new_data_part, new_text_part
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import JSON_RPC_ERROR_CODE_MAP, A2AError
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


def keep_interface(card, spelling):
    """`card` with only its JSON-RPC interface of `spelling` (the one the SDK then speaks)."""
    keep = [i for i in card.supported_interfaces
            if i.protocol_binding == "JSONRPC" and i.protocol_version.startswith(spelling)]
    if not keep:
        sys.exit(f"the card offers no JSON-RPC {spelling} interface: {card}")
    chosen = type(keep[0])()
    chosen.CopyFrom(keep[0])
    del card.supported_interfaces[:]
    card.supported_interfaces.add().CopyFrom(chosen)
    return card


async def turns(args, http, card):
    """Each prompt streamed in one context (the default mode)."""
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


async def check(name, call):
    """One check: what `call` (a coroutine) returned, summarized, or the SDK error it raised."""
    try:
        seen = await call
    except A2AError as e:
        seen = {"error": type(e).__name__, "code": JSON_RPC_ERROR_CODE_MAP.get(type(e))}
    out(dict(seen, check=name))
    return seen


def task_seen(task):
    d = MessageToDict(task)
    texts = [t for m in d.get("history", []) for t in parts_of(m.get("parts", []))[0]]
    return {"task": d.get("id"), "context": d.get("contextId"),
            "state": norm_state(d.get("status", {}).get("state")),
            "history": len(d.get("history", [])), "texts": texts}


async def conformance(args, http, card):
    """The requests of A2A 1.0's rules the SDK can send, each a check."""
    config = ClientConfig(streaming=False, httpx_client=http)
    client = await create_client(card, client_config=config)
    streaming = await create_client(card, client_config=ClientConfig(streaming=True, httpx_client=http))

    async def send(text, return_immediately=False, **fields):
        """A non-streaming SendMessage; the task answered, and how long it took."""
        fields.setdefault("message_id", f"m-{text}")
        fields.setdefault("role", Role.ROLE_USER)
        request = SendMessageRequest(message=Message(parts=[new_text_part(text)], **fields))
        request.configuration.return_immediately = return_immediately
        started = time.monotonic()
        answers = [e async for e in client.send_message(request)]
        return dict(task_seen(answers[-1].task), seconds=round(time.monotonic() - started, 3))

    async def listed(**fields):
        r = await client.list_tasks(ListTasksRequest(**fields))
        return {"tasks": [t.id for t in r.tasks], "total": r.total_size, "page_size": r.page_size,
                "next": r.next_page_token, "artifacts": [len(t.artifacts) for t in r.tasks]}

    async def got(task_id, history_length):
        return task_seen(await client.get_task(GetTaskRequest(id=task_id, history_length=history_length)))

    async def subscribed(task_id):
        return {"events": [summary(e) async for e in streaming.subscribe(SubscribeToTaskRequest(id=task_id))]}

    async def answered(call):
        answer = await call
        return {"answer": None if answer is None else MessageToDict(answer)}

    done = await check("blocking", send("hello"))
    slow = await check("return_immediately", send("slow please", return_immediately=True))
    # A message without a messageId; one without a role (the SDK leaves out
    # ROLE_UNSPECIFIED); a message to an ended task: refused, nothing listed of them.
    await check("no_message_id", send("hello", message_id=""))
    await check("no_role", send("hello", role=Role.ROLE_UNSPECIFIED))
    await check("send_to_terminal", send("more", task_id=done["task"], context_id=done["context"]))
    # A subscription to the ended task: its error an SSE event.
    await check("subscribe_to_terminal", subscribed(done["task"]))
    await check("list_by_context", listed(context_id=slow["context"], page_size=1))
    first = await check("list_page", listed(page_size=1))
    await check("list_next_page", listed(page_size=1, page_token=first.get("next", "")))
    await check("list_completed", listed(status=TaskState.TASK_STATE_COMPLETED, include_artifacts=True))
    await check("list_bad_token", listed(page_token="invalid-token-xyz"))
    await check("get_history_1", got(done["task"], 1))
    await check("get_history_negative", got(done["task"], -1))
    t = done["task"]
    push = TaskPushNotificationConfig(task_id=t, url="https://example.com/hook")
    await check("push_create", answered(client.create_task_push_notification_config(push)))
    await check("push_get", answered(client.get_task_push_notification_config(
        GetTaskPushNotificationConfigRequest(task_id=t, id="c"))))
    await check("push_list", answered(client.list_task_push_notification_configs(
        ListTaskPushNotificationConfigsRequest(task_id=t))))
    await check("push_delete", answered(client.delete_task_push_notification_config(
        DeleteTaskPushNotificationConfigRequest(task_id=t, id="c"))))
    # The card declares no extended card: the SDK answers with it, sending nothing; a
    # copy that claims one makes the SDK ask.
    await check("extended_card_undeclared", answered(client.get_extended_agent_card(GetExtendedAgentCardRequest())))
    claiming = type(card)()
    claiming.CopyFrom(card)
    claiming.capabilities.extended_agent_card = True
    asking = await create_client(claiming, client_config=config)
    await check("extended_card", answered(asking.get_extended_agent_card(GetExtendedAgentCardRequest())))
    root = args.url.split("/a2a/")[0]
    await check("root_card", answered(A2ACardResolver(http, root).get_agent_card()))
    await check("cancel", answered(client.cancel_task(CancelTaskRequest(id=slow["task"]))))
    for c in (client, streaming, asking):
        await c.close()


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--token")
    ap.add_argument("--spelling", choices=["1.0", "0.3"], default="1.0")
    ap.add_argument("--extension", action="store_true")
    ap.add_argument("--answer", default="allow_once")
    ap.add_argument("--get", action="store_true")
    ap.add_argument("--conformance", action="store_true")
    ap.add_argument("prompts", nargs="*")
    args = ap.parse_args()
    if not args.conformance and not args.prompts:
        ap.error("PROMPT... or --conformance")
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    async with httpx.AsyncClient(headers=headers, timeout=120) as http:
        card = keep_interface(await A2ACardResolver(http, args.url).get_agent_card(), args.spelling)
        await (conformance if args.conformance else turns)(args, http, card)

if __name__ == "__main__":
    asyncio.run(main())
