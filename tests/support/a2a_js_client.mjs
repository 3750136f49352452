// An A2A client on the official JS SDK (@a2a-js/sdk 1.3.0, peer `a2a-js`), for
// capfleet's tests of `capfleet serve --expose`; the JS twin of a2a_py_client.py.
//
//   node a2a_js_client.mjs SDK_PACKAGE_JSON --url BASE [--token T] [--spelling 1.0|0.3]
//        [--extension] [--answer DECISION] [--get] PROMPT...
//
// SDK_PACKAGE_JSON is the installed SDK's package.json (`install_peers.sh --path
// a2a-js`), the SDK loaded from beside it. The card is read at
// BASE/.well-known/agent-card.json (with the bearer token), only its JSON-RPC
// interface of `--spelling` kept (0.3 through the SDK's legacy compat transport),
// and each PROMPT sent as a streaming message in one context. A stream that ends
// in `input-required` is answered with `--answer` (a marked
// `cap.permission.response` data part with `--extension`, else the text) and
// streamed on. Output: the NDJSON a2a_py_client.py prints.
import { createRequire } from 'node:module';

const require = createRequire(process.argv[2]);
const { Role, TaskState } = require('@a2a-js/sdk');
const { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory } =
  require('@a2a-js/sdk/client');

const argv = process.argv.slice(3);
const opts = { spelling: '1.0', answer: 'allow_once', extension: false, get: false, prompts: [] };
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (a === '--url') opts.url = argv[++i];
  else if (a === '--token') opts.token = argv[++i];
  else if (a === '--spelling') opts.spelling = argv[++i];
  else if (a === '--answer') opts.answer = argv[++i];
  else if (a === '--extension') opts.extension = true;
  else if (a === '--get') opts.get = true;
  else opts.prompts.push(a);
}
const CAP = 'cap-protocol/v1';
const out = (o) => process.stdout.write(`${JSON.stringify(o)}\n`);
const authed = (input, init = {}) => {
  const headers = new Headers(init.headers ?? {});
  if (opts.token) headers.set('Authorization', `Bearer ${opts.token}`);
  return fetch(input, { ...init, headers });
};
const stateName = (s) => {
  const name = typeof s === 'number' ? TaskState[s] : s;
  return name ? String(name).replace(/^TASK_STATE_/, '').toLowerCase().replace(/_/g, '-') : null;
};
const partsOf = (parts = []) => ({
  texts: parts.filter((p) => p.content?.$case === 'text').map((p) => p.content.value),
  data: parts.filter((p) => p.content?.$case === 'data').map((p) => p.content.value),
});
const summary = (ev) => {
  const { $case, value } = ev.payload ?? {};
  const kind = { task: 'task', statusUpdate: 'status', artifactUpdate: 'artifact', message: 'message' }[$case];
  let parts = [];
  let state = null;
  if ($case === 'artifactUpdate') parts = value.artifact?.parts;
  else if ($case === 'message') parts = value.parts;
  else { parts = value.status?.message?.parts; state = stateName(value.status?.state); }
  return { kind, task: value.id || value.taskId || null, context: value.contextId || null, state, ...partsOf(parts) };
};
const textPart = (t) => ({ content: { $case: 'text', value: t }, mediaType: '', filename: '', metadata: undefined });
const dataPart = (v) => ({ content: { $case: 'data', value: v }, mediaType: '', filename: '', metadata: undefined });
const message = (id, parts, contextId = '', taskId = '') => ({
  messageId: id, contextId, taskId, role: Role.ROLE_USER, parts, metadata: undefined, extensions: [],
  referenceTaskIds: [],
});

const legacyCompat = { enabled: true };
const resolver = new DefaultAgentCardResolver({ fetchImpl: authed, legacyCompat });
// The card beneath the agent's URL (the resolver would take an absolute path from the host).
const card = await resolver.resolve(`${opts.url.replace(/\/$/, '')}/.well-known/agent-card.json`, '');
card.supportedInterfaces = card.supportedInterfaces
  .filter((i) => i.protocolBinding === 'JSONRPC' && i.protocolVersion.startsWith(opts.spelling))
  .slice(0, 1);
if (card.supportedInterfaces.length === 0) throw new Error(`no JSON-RPC ${opts.spelling} interface`);
const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
  transports: [new JsonRpcTransportFactory({ fetchImpl: authed, legacyCompat })],
  cardResolver: resolver,
}));
const client = await factory.createFromAgentCard(card);
const requestOptions = opts.extension ? { serviceParameters: { 'A2A-Extensions': CAP } } : {};

let contextId = '';
for (const [turn, prompt] of opts.prompts.entries()) {
  let msg = message(`m-${turn}`, [textPart(prompt)], contextId);
  let taskId = '';
  for (;;) {
    let last = {};
    for await (const ev of client.sendMessageStream({ message: msg, tenant: '', metadata: undefined }, requestOptions)) {
      const s = summary(ev);
      out({ turn, ...s });
      taskId = s.task || taskId;
      contextId = s.context || contextId;
      if (s.state) last = s;
    }
    if (last.state !== 'input-required') break;
    const request = last.data.find((d) => d?._meta?.['cap.kind'] === 'cap.permission.request') ?? null;
    out({ turn, answered: request });
    const part = request && opts.extension
      ? dataPart({ _meta: { 'cap.kind': 'cap.permission.response' }, req_id: request.req_id, decision: opts.answer })
      : textPart(opts.answer);
    msg = message(`m-${turn}-answer`, [part], contextId, taskId);
  }
  if (opts.get && taskId) {
    const task = await client.getTask({ id: taskId, tenant: '', historyLength: undefined }, requestOptions);
    const texts = (task.history ?? []).flatMap((m) => partsOf(m.parts).texts);
    out({ turn, got: { state: stateName(task.status?.state), texts, artifacts: (task.artifacts ?? []).length } });
  }
}
