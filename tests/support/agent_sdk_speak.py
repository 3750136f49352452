"""Drive `capfleet speak` with the official Claude Agent SDK (claude-agent-sdk).

    agent_sdk_speak.py CLI_PATH

CLI_PATH is an executable that runs `capfleet speak ...` with the SDK's flags
appended. Two turns through one ClaudeSDKClient: the first answers a permission
through the SDK's can_use_tool callback, the second is interrupted once its first
text arrived. Prints one JSON object: what the SDK parsed, for the Rust test to check.
"""

import asyncio
import json
import sys

from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    PermissionResultAllow,
    ResultMessage,
    SystemMessage,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)


def describe(message):
    if isinstance(message, SystemMessage):
        return {"system": message.subtype, "session_id": message.data.get("session_id")}
    if isinstance(message, AssistantMessage):
        blocks = []
        for b in message.content:
            if isinstance(b, TextBlock):
                blocks.append({"text": b.text})
            elif isinstance(b, ToolUseBlock):
                blocks.append({"tool_use": b.name, "input": b.input})
            else:
                blocks.append({"other": type(b).__name__})
        return {"assistant": blocks}
    if isinstance(message, UserMessage):
        results = [
            {"tool_result": b.content, "is_error": b.is_error}
            for b in (message.content if isinstance(message.content, list) else [])
            if isinstance(b, ToolResultBlock)
        ]
        return {"user": results}
    if isinstance(message, ResultMessage):
        return {
            "result": message.result,
            "subtype": message.subtype,
            "is_error": message.is_error,
            "num_turns": message.num_turns,
            "total_cost_usd": message.total_cost_usd,
            "usage": message.usage,
            "session_id": message.session_id,
        }
    return {"other": type(message).__name__}


async def main(cli_path):
    asked = []

    async def can_use_tool(tool_name, tool_input, context):
        asked.append({"tool": tool_name, "input": tool_input})
        return PermissionResultAllow()

    options = ClaudeAgentOptions(cli_path=cli_path, can_use_tool=can_use_tool)
    turns = []
    async with ClaudeSDKClient(options=options) as client:
        await client.query("first")
        turns.append([describe(m) async for m in client.receive_response()])

        await client.query("second")
        second = []
        interrupted = False
        async for m in client.receive_response():
            second.append(describe(m))
            if isinstance(m, AssistantMessage) and not interrupted:
                interrupted = True
                await client.interrupt()
        turns.append(second)
    print(json.dumps({"asked": asked, "turns": turns}))


if __name__ == "__main__":
    asyncio.run(asyncio.wait_for(main(sys.argv[1]), timeout=60))
