// Drive `capfleet speak` with the official Claude Agent SDK (@anthropic-ai/claude-agent-sdk).
//
//     node agent_sdk_speak.mjs SDK_DIR CLI_PATH
//
// SDK_DIR holds the SDK's node_modules; CLI_PATH is an executable that runs
// `capfleet speak ...` with the SDK's flags appended. Two turns through one query in
// streaming-input mode: the first answers a permission through the SDK's canUseTool
// callback, the second is interrupted once its first text arrived. Prints one JSON
// object: what the SDK delivered, for the Rust test to check.
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [sdkDir, cliPath] = process.argv.slice(2);
const require = createRequire(path.join(sdkDir, "package.json"));
const { query } = await import(pathToFileURL(require.resolve("@anthropic-ai/claude-agent-sdk")).href);

// The prompts, one per turn, each released when the previous turn's result arrived.
let release;
const prompts = (async function* () {
  for (const text of ["first", "second"]) {
    yield { type: "user", message: { role: "user", content: text }, parent_tool_use_id: null, session_id: "" };
    await new Promise((r) => (release = r));
  }
})();

const asked = [];
const q = query({
  prompt: prompts,
  options: {
    pathToClaudeCodeExecutable: cliPath,
    mcpServersVia: "argv",
    canUseTool: async (toolName, input) => {
      asked.push({ tool: toolName, input });
      return { behavior: "allow", updatedInput: input };
    },
  },
});

function describe(m) {
  switch (m.type) {
    case "system":
      return { system: m.subtype, session_id: m.session_id };
    case "assistant":
      return {
        assistant: m.message.content.map((b) =>
          b.type === "text" ? { text: b.text } : b.type === "tool_use" ? { tool_use: b.name, input: b.input } : { other: b.type },
        ),
      };
    case "user":
      return {
        user: (Array.isArray(m.message.content) ? m.message.content : [])
          .filter((b) => b.type === "tool_result")
          .map((b) => ({ tool_result: b.content, is_error: b.is_error })),
      };
    case "result":
      return {
        result: m.result ?? null,
        subtype: m.subtype,
        is_error: m.is_error,
        num_turns: m.num_turns,
        total_cost_usd: m.total_cost_usd,
        usage: m.usage,
        session_id: m.session_id,
      };
    default:
      return { other: m.type };
  }
}

const turns = [[]];
let interrupted = false;
const timer = setTimeout(() => {
  console.error("timed out");
  process.exit(2);
}, 60000);
for await (const m of q) {
  const turn = turns[turns.length - 1];
  turn.push(describe(m));
  if (m.type === "assistant" && turns.length === 2 && !interrupted) {
    interrupted = true;
    await q.interrupt();
  }
  if (m.type === "result") {
    if (turns.length === 2) break;
    turns.push([]);
    release();
  }
}
clearTimeout(timer);
release?.();
console.log(JSON.stringify({ asked, turns }));
process.exit(0);
