"""An MCP client on the official Python SDK (`mcp` 2.3.0, peer `mcp-py`), for
capfleet's tests of `capfleet mcp` (stdio) and `capfleet serve`'s `/mcp`
(Streamable HTTP).

usage: mcp_client.py (--stdio CAPFLEET [--stdio-args ARGS] | --url URL --token T) drive
                     --demo JSON --ask JSON [--approve-token T2]
       mcp_client.py --url URL --token T refused --run RUN --ask-id ID

`drive`: lists the tools, starts the demo fleet (`--demo`: a file holding the
start_run arguments: `fleet_path`, or `fleet_toml` and `files`), polls its
run_status to its end, reads worker-a's session_diff, lists the runs, starts a
second fleet (`--ask`) whose session asks leave for a tool, polls list_asks until
the permission is open, answers it allow_once (over HTTP first with --token, then
with --approve-token when given), waits for that run with wait_run (progress
notifications counted) and reads its journal resource.

`refused`: as a `read` token: lists the runs and reads run RUN's status (allowed),
then tries start_run, cancel_run RUN and answer_ask RUN ID (each refused).

Output: one JSON object per line on stdout, {"step": NAME, ...what was seen}; a
tool error as {"step": NAME, "error": CODE, "message": ...}. The test judges the
lines; the script only observes (and stops at what it cannot go on without).
"""

import argparse
import asyncio
import json
import os
import sys
import time

from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

POLL = 0.2
RUN_TIMEOUT = 120.0


def say(step, **seen):
    print(json.dumps({"step": step, **seen}), flush=True)


def outcome(result):
    """The structured result, or the tool error's code and message."""
    if result.is_error:
        text = "".join(getattr(c, "text", "") for c in result.content)
        body = result.structured_content or json.loads(text or "{}")
        return None, {"error": body.get("code"), "message": body.get("message")}
    return result.structured_content, None


async def call(client, step, name, args, **kw):
    result = await client.call_tool(name, args, **kw)
    value, error = outcome(result)
    if error:
        say(step, **error)
    return value


def connect(args, token=None):
    if args.stdio:
        # `capfleet mcp` in this directory, with this environment (the SDK passes
        # only a few variables by default).
        params = StdioServerParameters(
            command=args.stdio,
            args=["mcp", *args.stdio_args.split()],
            env=dict(os.environ),
            cwd=os.getcwd(),
        )
        return Client(params)
    headers = {"Authorization": f"Bearer {token or args.token}"}
    http = create_mcp_http_client(headers=headers)
    return Client(streamable_http_client(args.url, http_client=http))


async def until_ended(client, run, step):
    deadline = time.monotonic() + RUN_TIMEOUT
    polls = 0
    while True:
        status = await call(client, step, "run_status", {"run": run})
        polls += 1
        if status is None:
            return None
        if status["state"] not in ("queued", "running"):
            say(step, polls=polls, status=status)
            return status
        if time.monotonic() > deadline:
            say(step, timeout=True, status=status)
            return None
        await asyncio.sleep(POLL)


async def drive(args):
    demo = json.load(open(args.demo))
    ask = json.load(open(args.ask))
    async with connect(args) as client:
        tools = (await client.list_tools()).tools
        say(
            "tools",
            protocol=client.protocol_version,
            names=sorted(t.name for t in tools),
            with_output_schema=sorted(t.name for t in tools if t.output_schema),
        )
        started = await call(client, "start_demo", "start_run", demo)
        if started is None:
            return
        say("start_demo", started=started)
        run = started["run"]
        if await until_ended(client, run, "demo_status") is None:
            return
        diff = await call(client, "diff", "session_diff", {"run": run, "session": "worker-a"})
        if diff is not None:
            say("diff", files=diff["files"], patch=diff["patch"])
        runs = await call(client, "runs", "list_runs", {})
        if runs is not None:
            say("runs", runs=runs["runs"])

        second = await call(client, "start_ask", "start_run", ask)
        if second is None:
            return
        say("start_ask", started=second)
        run2 = second["run"]
        deadline = time.monotonic() + RUN_TIMEOUT
        while True:
            asks = await call(client, "asks", "list_asks", {"run": run2})
            if asks is None:
                return
            if asks["asks"]:
                say("asks", asks=asks["asks"])
                break
            if time.monotonic() > deadline:
                say("asks", timeout=True)
                return
            await asyncio.sleep(POLL)
        answer = {"run": run2, "ask_id": asks["asks"][0]["ask_id"], "decision": "allow_once"}
        if args.approve_token:
            # The run token may start and cancel, not answer.
            await call(client, "answer_as_runner", "answer_ask", answer)
            async with connect(args, args.approve_token) as approver:
                answered = await call(approver, "answer", "answer_ask", answer)
        else:
            answered = await call(client, "answer", "answer_ask", answer)
        if answered is None:
            return
        say("answer", answered=answered)
        progress = []

        async def on_progress(value, total, message):
            progress.append({"progress": value, "message": message})

        waited = await call(
            client, "wait", "wait_run", {"run": run2, "timeout_s": 120}, progress_callback=on_progress
        )
        if waited is None:
            return
        say("wait", status=waited, progress=progress)
        journal = await client.read_resource(f"capfleet://runs/{run2}/journal")
        text = "".join(getattr(c, "text", "") for c in journal.contents)
        records = [json.loads(l) for l in text.splitlines() if l.strip()]
        say("journal", records=len(records), mcp_calls=[r for r in records if r.get("type") == "mcp_call"])


async def refused(args):
    async with connect(args) as client:
        runs = await call(client, "runs", "list_runs", {})
        if runs is not None:
            say("runs", runs=len(runs["runs"]))
        status = await call(client, "status", "run_status", {"run": args.run})
        if status is not None:
            say("status", state=status["state"])
        await call(client, "start", "start_run", {"fleet_toml": "[fleet]\nname = \"x\"\n"})
        await call(client, "cancel", "cancel_run", {"run": args.run})
        await call(
            client, "answer", "answer_ask", {"run": args.run, "ask_id": args.ask_id, "decision": "deny"}
        )


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--stdio")
    p.add_argument("--stdio-args", default="")
    p.add_argument("--url")
    p.add_argument("--token")
    p.add_argument("scenario", choices=["drive", "refused"])
    p.add_argument("--demo")
    p.add_argument("--ask")
    p.add_argument("--approve-token")
    p.add_argument("--run")
    p.add_argument("--ask-id")
    args = p.parse_args()
    if args.scenario == "drive":
        asyncio.run(drive(args))
    else:
        asyncio.run(refused(args))


if __name__ == "__main__":
    sys.exit(main())
