// A small A2A agent on the official JS SDK (@a2a-js/sdk 1.3.0 with express, peer
// `a2a-js`), for capfleet's A2A interop tests.
//
//   node a2a_js_agent.mjs SDK_PACKAGE_JSON
//
// SDK_PACKAGE_JSON is the installed SDK's package.json (`install_peers.sh --path
// a2a-js`): the SDK and express are loaded from beside it, since a script outside
// that tree cannot import them by name. It binds 127.0.0.1 on a free port, prints
// "127.0.0.1:PORT" as its first stdout line, and serves a 1.0 card (with the
// `cap-protocol/v1` extension) and the JSON-RPC binding at /a2a/jsonrpc. Each
// prompt is one task: "streaming: <prompt>" said, an artifact `notes.md` streamed
// in three chunks (the first not appended, the last marked `lastChunk`), usage as
// a `cap.usage` data part on the completed status.
import { createRequire } from 'node:module';
import { randomUUID } from 'node:crypto';

const require = createRequire(process.argv[2]);
const express = require('express');
const { TaskState, Role } = require('@a2a-js/sdk');
const { DefaultRequestHandler, InMemoryTaskStore, AgentEvent } = require('@a2a-js/sdk/server');
const { agentCardHandler, jsonRpcHandler, UserBuilder } = require('@a2a-js/sdk/server/express');

const part = (content, mediaType = '') => ({ content, metadata: undefined, filename: '', mediaType });
const text = (t, mediaType = 'text/plain') => part({ $case: 'text', value: t }, mediaType);
const data = (v) => part({ $case: 'data', value: v }, 'application/json');
const CHUNKS = ['# Notes\n', '- one\n', '- two\n'];

function card(base) {
  return {
    name: 'capfleet-a2a-js', description: "capfleet's test agent on @a2a-js/sdk", version: '1.3.0',
    supportedInterfaces: [
      { url: `${base}/a2a/jsonrpc`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' },
    ],
    capabilities: {
      streaming: true, pushNotifications: false, extendedAgentCard: false,
      extensions: [{ uri: 'cap-protocol/v1', description: '', required: false, params: undefined }],
    },
    securitySchemes: {}, securityRequirements: [], defaultInputModes: ['text'], defaultOutputModes: ['text'],
    skills: [{ id: 'notes', name: 'streamed notes', description: 'streams an artifact', tags: ['test'],
      examples: [], inputModes: ['text'], outputModes: ['text'], securityRequirements: [] }],
    documentationUrl: '', signatures: [],
  };
}

class Agent {
  cancelTask = async () => {};
  async execute(ctx, bus) {
    const { taskId, contextId, userMessage } = ctx;
    const prompt = userMessage.parts.find((p) => p.content?.$case === 'text')?.content.value ?? '';
    const now = () => new Date().toISOString();
    const status = (state, parts) => bus.publish(AgentEvent.statusUpdate({
      taskId, contextId, metadata: undefined,
      status: { state, timestamp: now(), message: parts && {
        messageId: randomUUID(), contextId, taskId, role: Role.ROLE_AGENT, parts,
        metadata: undefined, extensions: [], referenceTaskIds: [] } },
    }));
    if (!ctx.task) {
      bus.publish(AgentEvent.task({ id: taskId, contextId, artifacts: [], history: [userMessage],
        status: { state: TaskState.TASK_STATE_SUBMITTED, timestamp: now() } }));
    }
    status(TaskState.TASK_STATE_WORKING, [text(`streaming: ${prompt}`)]);
    const artifactId = randomUUID();
    CHUNKS.forEach((chunk, i) => bus.publish(AgentEvent.artifactUpdate({
      taskId, contextId, metadata: undefined,
      artifact: { artifactId, name: 'notes.md', description: '', parts: [text(chunk, 'text/markdown')],
        metadata: undefined, extensions: [] },
      append: i > 0, lastChunk: i === CHUNKS.length - 1,
    })));
    status(TaskState.TASK_STATE_COMPLETED,
      [data({ _meta: { 'cap.kind': 'cap.usage' }, input_tokens: 5, output_tokens: 2 })]);
  }
}

const app = express();
const server = app.listen(0, '127.0.0.1', () => {
  const { address, port } = server.address();
  const base = `http://${address}:${port}`;
  const handler = new DefaultRequestHandler(card(base), new InMemoryTaskStore(), new Agent());
  app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: handler }));
  app.use('/a2a/jsonrpc', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
  console.log(`${address}:${port}`);
});
