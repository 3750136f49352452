"""A small A2A agent on the official Python SDK (a2a-sdk 1.3.0, peer `a2a-py`),
written with the SDK's AgentExecutor, for capfleet's A2A interop tests.

usage: a2a_py_agent.py --spelling 1.0|0.3 [--plain] [--task-first]

It binds 127.0.0.1 on a free port, prints "127.0.0.1:PORT" as its first stdout
line and serves its card at /.well-known/agent-card.json and A2A's JSON-RPC
binding at /. `--spelling 1.0` serves the 1.0 routes only (the card offers one
1.0 JSON-RPC interface); `--spelling 0.3` serves with the SDK's v0.3 compat on
and a card offering one 0.3 interface, so a client speaks 0.3 to it. The card
advertises the `cap-protocol/v1` extension unless `--plain`; CAP data parts
(`_meta["cap.kind"]`) are sent only to a client that activates it (the
`A2A-Extensions` / `X-A2A-Extensions` request header), as A2A extensions work.
`--task-first`: when a message continues a task, the executor first enqueues the
Task as it stands when the message arrives (A2A lets a stream open with the Task):
after an answer, still `input-required`, its status message still the question.

What a prompt does (its first word):
  permission  input-required asking to run Bash (a cap.permission.request data
              part, or the text alone without the extension); the answer
              message's decision is said back ("decision: allow_once"), then
              the task completes
  slow        says "working", then waits a minute: cancel it (its cancel()
              publishes the canceled state)
  later       says "half", waits 1.5 s, says " done" and completes (with a usage
              part): a task that ends while its client may be gone
  anything    says "echo: <prompt>" in two status messages, streams a
              text/x-diff artifact in two chunks, completes with a usage part
"""

import argparse
import asyncio
import socket

import uvicorn
from a2a.helpers.proto_helpers import (
    get_data_parts,
    get_message_text,
    new_data_part,
    new_task,
    new_text_part,
)
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentSkill,
    TaskState,
)
from starlette.applications import Starlette

CAP = "cap-protocol/v1"


def cap_part(kind, **fields):
    return new_data_part(dict(fields, _meta={"cap.kind": kind}))


class Agent(AgentExecutor):
    def __init__(self, task_first: bool):
        self.task_first = task_first

    async def execute(self, context: RequestContext, event_queue: EventQueue):
        cap = CAP in context.requested_extensions
        task = context.current_task
        if task is None:
            task = new_task(context.task_id, context.context_id,
                            TaskState.TASK_STATE_SUBMITTED, history=[context.message])
            await event_queue.enqueue_event(task)
        elif self.task_first:
            await event_queue.enqueue_event(task)
        up = TaskUpdater(event_queue, task.id, task.context_id)
        say = lambda text: up.update_status(  # noqa: E731
            TaskState.TASK_STATE_WORKING, up.new_agent_message([new_text_part(text)]))
        if task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            # The client's answer to our question.
            answers = [d for d in get_data_parts(context.message.parts)
                       if d.get("_meta", {}).get("cap.kind") == "cap.permission.response"]
            decision = answers[0].get("decision") if answers else get_message_text(context.message)
            await say(f"decision: {decision}")
            await up.complete()
            return
        text = get_message_text(context.message)
        word = text.split(" ", 1)[0]
        await up.start_work()
        if word == "permission":
            parts = [new_text_part("May I run Bash: ls?")]
            if cap:
                parts.append(cap_part("cap.permission.request", req_id="py-perm-1", tool="Bash",
                                      intent={"command": "ls"}, risk_level="low"))
            await up.requires_input(up.new_agent_message(parts))
            return
        if word == "later":
            await say("half")
            await asyncio.sleep(1.5)
            await say(" done")
            done = [cap_part("cap.usage", input_tokens=5, output_tokens=2)] if cap else []
            await up.complete(up.new_agent_message(done) if done else None)
            return
        if word == "slow":
            await say("working")
            await asyncio.sleep(60)
            await say("never")
            await up.complete()
            return
        await say("echo: ")
        await say(text)
        diff = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n"
        await up.add_artifact([new_text_part(diff[:16], media_type="text/x-diff")],
                              artifact_id="py-diff", name="change.diff",
                              append=False, last_chunk=False)
        await up.add_artifact([new_text_part(diff[16:], media_type="text/x-diff")],
                              artifact_id="py-diff", name="change.diff",
                              append=True, last_chunk=True)
        done = [cap_part("cap.usage", input_tokens=7, output_tokens=3)] if cap else []
        await up.complete(up.new_agent_message(done) if done else None)

    async def cancel(self, context: RequestContext, event_queue: EventQueue):
        task = context.current_task
        up = TaskUpdater(event_queue, task.id if task else context.task_id,
                         task.context_id if task else context.context_id)
        await up.cancel()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--spelling", choices=["1.0", "0.3"], default="1.0")
    ap.add_argument("--plain", action="store_true")
    ap.add_argument("--task-first", action="store_true")
    args = ap.parse_args()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    host, port = sock.getsockname()
    url = f"http://{host}:{port}/"
    extensions = [] if args.plain else [AgentExtension(uri=CAP, required=False)]
    card = AgentCard(
        name="capfleet-a2a-py", description="capfleet's test agent on a2a-sdk", version="1.3.0",
        default_input_modes=["text/plain"], default_output_modes=["text/plain"],
        capabilities=AgentCapabilities(streaming=True, extensions=extensions),
        supported_interfaces=[AgentInterface(protocol_binding="JSONRPC",
                                             protocol_version=args.spelling, url=url)],
        skills=[AgentSkill(id="echo", name="echo", description="echoes, asks, waits",
                           tags=["test"])],
    )
    handler = DefaultRequestHandler(agent_executor=Agent(args.task_first), task_store=InMemoryTaskStore(),
                                    agent_card=card)
    routes = create_agent_card_routes(card) + create_jsonrpc_routes(
        handler, rpc_url="/", enable_v0_3_compat=args.spelling == "0.3")
    print(f"{host}:{port}", flush=True)
    server = uvicorn.Server(uvicorn.Config(Starlette(routes=routes), log_level="warning"))
    asyncio.run(server.serve(sockets=[sock]))


if __name__ == "__main__":
    main()
