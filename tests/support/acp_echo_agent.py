"""A tiny ACP agent on the official Python SDK (agent-client-protocol==0.12.1).

Prompts: "echo: X" answers X; "slow" streams until cancelled; "dots N" streams N dots, 50 ms apart; "perm" asks a
permission and says the outcome; "perm-many N" asks N at once and counts the allowed; "read PATH" reads through the client's fs;
"elicit" asks a form elicitation (a name) and says the action and content it got back;
"crash" dies mid-prompt ("crash-once": only the first time in this cwd). Advertises loadSession; a load is announced as text.
Advertises session/close too: a close is recorded in ".closed" (the session id) in the cwd.
"perm-withdrawn" asks a permission, then cancels its own request ($/cancel_request) and says the outcome it got.
"cost X" reports a usage_update with X as the session's cumulative USD cost. With ACP_ECHO_RESUME=1 it also
advertises session/resume; a resume is announced as text ("[resumed ID] ").
"""
import asyncio
import json
import os
import uuid

from acp import run_agent, text_block, update_agent_message_text
from acp.schema import (AgentCapabilities, CloseSessionResponse, ElicitationFormSessionMode,
                        ElicitationSchema, ElicitationStringPropertySchema, InitializeResponse,
                        LoadSessionResponse, NewSessionResponse, PermissionOption, PromptResponse,
                        ResumeSessionResponse, SessionCapabilities, SessionCloseCapabilities,
                        SessionResumeCapabilities, ToolCallUpdate, UsageUpdate)


class Echo:
    def on_connect(self, conn):
        self.conn, self.cancelled, self.loaded = conn, set(), None

    async def initialize(self, protocol_version, **_):
        resume = SessionResumeCapabilities() if os.environ.get("ACP_ECHO_RESUME") == "1" else None
        close = SessionCapabilities(close=SessionCloseCapabilities(), resume=resume)
        caps = AgentCapabilities(load_session=True, session_capabilities=close)
        return InitializeResponse(protocol_version=protocol_version, agent_capabilities=caps)

    async def new_session(self, cwd, **_):
        return NewSessionResponse(session_id=f"echo-{uuid.uuid4().hex[:8]}")

    async def load_session(self, cwd, session_id, **_):
        self.loaded = session_id
        return LoadSessionResponse()

    async def resume_session(self, cwd, session_id, **_):
        self.loaded = f"resumed {session_id}"
        return ResumeSessionResponse()

    async def cancel(self, session_id, **_):
        self.cancelled.add(session_id)

    async def close_session(self, session_id, **_):
        with open(".closed", "w") as f:
            f.write(session_id)
        return CloseSessionResponse()

    async def say(self, sid, text):
        await self.conn.session_update(sid, update_agent_message_text(text))

    async def prompt(self, session_id, prompt, **_):
        text = "".join(getattr(b, "text", "") for b in prompt)
        sid = session_id
        if self.loaded:
            seen = self.loaded if self.loaded.startswith("resumed ") else f"loaded {self.loaded}"
            await self.say(sid, f"[{seen}] ")
            self.loaded = None
        if text == "slow":
            self.cancelled.discard(sid)
            for _ in range(600):
                if sid in self.cancelled:
                    return PromptResponse(stop_reason="cancelled")
                await self.say(sid, ".")
                await asyncio.sleep(0.05)
        elif text.startswith("dots "):
            for _ in range(int(text.split()[1])):
                await self.say(sid, ".")
                await asyncio.sleep(0.05)
        elif text == "perm":
            opts = [PermissionOption(option_id="ok", name="Allow", kind="allow_once"),
                    PermissionOption(option_id="always", name="Always", kind="allow_always"),
                    PermissionOption(option_id="no", name="Reject", kind="reject_once")]
            tc = ToolCallUpdate(tool_call_id="t1", title="rm -rf build", kind="execute")
            r = await self.conn.request_permission(session_id=sid, tool_call=tc, options=opts)
            o = r.outcome
            await self.say(sid, f"outcome={getattr(o, 'option_id', None) or o.outcome}")
            if sid in self.cancelled:
                return PromptResponse(stop_reason="cancelled")
        elif text == "perm-withdrawn":
            raw = self.conn._conn  # the SDK sends no $/cancel_request itself: its raw connection does
            rid = raw._next_request_id
            opts = [PermissionOption(option_id="ok", name="Allow", kind="allow_once")]
            tc = ToolCallUpdate(tool_call_id="w1", title="rm -rf build", kind="execute")
            asked = asyncio.create_task(self.conn.request_permission(session_id=sid, tool_call=tc, options=opts))
            await asyncio.sleep(0.3)
            await raw.send_notification("$/cancel_request", {"requestId": rid})
            o = (await asked).outcome
            await self.say(sid, f"outcome={getattr(o, 'option_id', None) or o.outcome}")
        elif text.startswith("cost "):
            cost = {"amount": float(text.split()[1]), "currency": "USD"}
            await self.conn.session_update(sid, UsageUpdate(session_update="usage_update", used=7, size=100, cost=cost))
        elif text.startswith("perm-many "):
            n = int(text.split()[1])
            opts = [PermissionOption(option_id="ok", name="Allow", kind="allow_once")]

            async def ask(i):
                tc = ToolCallUpdate(tool_call_id=f"m{i}", title=f"tool {i}", kind="read")
                r = await self.conn.request_permission(session_id=sid, tool_call=tc, options=opts)
                return getattr(r.outcome, "option_id", None) == "ok"
            oks = await asyncio.gather(*(ask(i) for i in range(n)))
            await self.say(sid, f"allowed={sum(oks)}")
        elif text == "elicit":
            self.cancelled.discard(sid)
            schema = ElicitationSchema(properties={"name": ElicitationStringPropertySchema(type="string")},
                                       required=["name"])
            mode = ElicitationFormSessionMode(session_id=sid, requested_schema=schema)
            r = await self.conn.create_elicitation(message="Your name?", mode=mode)
            content = json.dumps(getattr(r, "content", None), sort_keys=True)
            await self.say(sid, f"action={r.action} content={content}")
            if sid in self.cancelled:
                return PromptResponse(stop_reason="cancelled")
        elif text.startswith("read "):
            try:
                r = await self.conn.read_text_file(session_id=sid, path=text[5:])
                await self.say(sid, f"content={r.content}")
            except Exception as e:  # noqa: BLE001 - the error is the answer
                await self.say(sid, f"error={e}")
        elif text == "crash-once" and not os.path.exists(".crashed"):
            open(".crashed", "w").close()
            await self.say(sid, "dying once")
            await asyncio.sleep(0.1)
            os._exit(3)
        elif text == "crash":
            await self.say(sid, "dying")
            await asyncio.sleep(0.1)
            os._exit(3)
        else:
            await self.say(sid, text.removeprefix("echo: "))
        return PromptResponse(stop_reason="end_turn")


asyncio.run(run_agent(Echo(), use_unstable_protocol=True))
