// How a conversation driven by the official Claude Agent SDK ends: the SDK drives
// CLI_PATH (Claude Code itself, or `capfleet speak`) as it drives Claude Code.
//
//     node agent_sdk_end.mjs SDK_DIR CLI_PATH INTERRUPT
//
// Three turns through one query in streaming-input mode, each prompt released by the
// previous turn's result; turn INTERRUPT (1-based; 0 for none) is interrupted at its
// first streamed text. Then the prompts end, so the SDK closes the CLI's stdin, and
// the query is read to its very end. Prints one JSON object: each result (subtype,
// is_error), the error the query ended with (null: a clean end) and the CLI's exit
// code and signal. The CLI is spawned as the SDK spawns it; the spawnClaudeCodeProcess
// hook is there only to learn how it exited.
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [sdkDir, cliPath, interruptArg] = process.argv.slice(2);
const interrupt = Number(interruptArg);
const require = createRequire(path.join(sdkDir, "package.json"));
const { query } = await import(pathToFileURL(require.resolve("@anthropic-ai/claude-agent-sdk")).href);

let release;
const prompts = (async function* () {
  for (const text of ["first", "second", "third"]) {
    yield { type: "user", message: { role: "user", content: text }, parent_tool_use_id: null, session_id: "" };
    await new Promise((r) => (release = r));
  }
})();

let exit = null;
let stderr = "";
const q = query({
  prompt: prompts,
  options: {
    pathToClaudeCodeExecutable: cliPath,
    includePartialMessages: true,
    spawnClaudeCodeProcess: ({ command, args, cwd, env, signal }) => {
      const child = spawn(command, args, { cwd, env, signal, stdio: ["pipe", "pipe", "pipe"] });
      child.stderr.on("data", (d) => (stderr += d));
      child.on("exit", (code, sig) => (exit = { code, signal: sig }));
      return child;
    },
  },
});

const timer = setTimeout(() => {
  console.error(`timed out; the CLI's stderr:\n${stderr}`);
  process.exit(2);
}, 60000);
const results = [];
let interrupted = false;
let error = null;
try {
  for await (const m of q) {
    const turn = results.length + 1;
    const text = m.type === "stream_event" && m.event.type === "content_block_delta";
    if (text && turn === interrupt && !interrupted) {
      interrupted = true;
      await q.interrupt();
    }
    if (m.type === "result") {
      results.push({ subtype: m.subtype, is_error: m.is_error });
      release();
    }
  }
} catch (e) {
  error = String(e?.message ?? e);
}
// The exit event may follow the stream's end by a moment.
for (let i = 0; exit === null && i < 100; i++) await new Promise((r) => setTimeout(r, 50));
clearTimeout(timer);
console.log(JSON.stringify({ results, error, exit, stderr: stderr.slice(-2000) }));
process.exit(0);
