"""An ACP client on the official Python SDK (agent-client-protocol==0.12.1) driving an
ACP agent given as the command line after the mode, printing what it saw as one JSON
object on stdout.

  acp_client.py turns CWD -- AGENT_ARGV...
      initialize, session/new, prompt "first" (its permission allowed once by this
      client), prompt "slow" cancelled once its first text arrived
  acp_client.py load CWD SESSION_ID -- AGENT_ARGV...
      initialize, session/load (the replayed updates kept), prompt "second"
"""
import asyncio
import json
import sys

from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
from acp.schema import AllowedOutcome, ClientCapabilities, RequestPermissionResponse


class Recorder:
    def __init__(self):
        self.updates, self.permissions = [], []
        self.started = asyncio.Event()

    def on_connect(self, conn):
        self.conn = conn

    async def request_permission(self, session_id, tool_call, options, **_):
        self.permissions.append({
            "session": session_id,
            "title": tool_call.title,
            "input": tool_call.raw_input,
            "options": [o.option_id for o in options],
        })
        allow = next(o.option_id for o in options if o.kind == "allow_once")
        return RequestPermissionResponse(outcome=AllowedOutcome(option_id=allow, outcome="selected"))

    async def session_update(self, session_id, update, **_):
        u = update.model_dump(mode="json", by_alias=True, exclude_none=True)
        self.updates.append(u)
        if "started" in json.dumps(u):
            self.started.set()


def texts(updates, kind="agent_message_chunk"):
    return "".join(u["content"]["text"] for u in updates if u.get("sessionUpdate") == kind)


async def turn(conn, rec, session_id, text):
    before = len(rec.updates)
    resp = await conn.prompt(session_id=session_id, prompt=[text_block(text)])
    got = rec.updates[before:]
    meta = resp.field_meta or {}
    return {"stop": resp.stop_reason, "meta": meta, "text": texts(got), "updates": got}


async def main():
    mode, cwd = sys.argv[1], sys.argv[2]
    rest = sys.argv[3:]
    loaded_id = rest.pop(0) if mode == "load" else None
    assert rest[0] == "--", rest
    argv = rest[1:]
    rec = Recorder()
    out = {}
    async with spawn_agent_process(rec, argv[0], *argv[1:]) as (conn, proc):
        init = await conn.initialize(protocol_version=PROTOCOL_VERSION,
                                     client_capabilities=ClientCapabilities())
        out["load_session"] = init.agent_capabilities.load_session
        out["agent"] = init.agent_info.name if init.agent_info else None
        if mode == "turns":
            session = await conn.new_session(cwd=cwd)
            out["session_id"] = session.session_id
            out["first"] = await turn(conn, rec, session.session_id, "first")
            slow = asyncio.create_task(turn(conn, rec, session.session_id, "slow"))
            await asyncio.wait_for(rec.started.wait(), 30)
            await conn.cancel(session_id=session.session_id)
            out["slow"] = await asyncio.wait_for(slow, 30)
        else:
            await conn.load_session(cwd=cwd, session_id=loaded_id)
            out["replayed"] = list(rec.updates)
            out["second"] = await turn(conn, rec, loaded_id, "second")
        out["permissions"] = rec.permissions
    print(json.dumps(out))


asyncio.run(main())
