// A central server calls OpenAI (and Anthropic, and Vertex AI) with one key for all its users, and the providers
// keep things under that key: stored chat completions, responses, conversations, files, batches. A non-admin
// who got 403 on /_local/api/traces listed another user's stored chat completions, read her response by id and
// continued it with previous_response_id, all through /proxy/beta/*. Now a call that reaches the key's stored
// objects is for admins only in server mode, on the native routes and through /v1 alike, and is refused before
// anything leaves the proxy.

import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startOidcIssuer, type LocalOidcIssuer } from '../fakes/oidc-issuer.ts';
import { startRecordingServer, type RecordingServer } from '../fakes/recording-server.ts';
import { startProxyProcess, type ProxyProcess } from '../e2e/proxy-process.ts';
import { chatCompletion } from './security-bed.ts';

const AUD = 'tollgate';
const ADMIN = 'admin@example.com';

let issuer: LocalOidcIssuer;
let upstream: RecordingServer;
let server: ProxyProcess;
let admin: string;
let bob: string;

beforeAll(async () => {
  [issuer, upstream] = await Promise.all([
    startOidcIssuer(),
    startRecordingServer((call, res) => {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(call.path.includes('/chat/completions') ? chatCompletion() : { object: 'list', data: [] }));
    }),
  ]);
  [admin, bob] = await Promise.all([issuer.idToken(ADMIN, AUD), issuer.idToken('bob@example.com', AUD)]);
  server = await startProxyProcess({
    args: ['--mode', 'server', '--host', '127.0.0.1'],
    env: { OPENAI_API_KEY: 'sk-server-shared-key', ANTHROPIC_API_KEY: 'sk-ant-server-shared' },
    readyHeaders: { authorization: `Bearer ${admin}` },
    configYaml: `
upstreams:
  beta: { baseUrl: "${upstream.url}" }
  gamma-direct: { baseUrl: "${upstream.url}" }
storage: { kind: sqlite, path: spans.db }
server:
  auth:
    oidc:
      - issuer: ${issuer.url}
        audiences: [${AUD}]
    admins: [${ADMIN}]
`,
  });
});

afterAll(async () => {
  await server?.stop();
  await Promise.all([issuer?.close(), upstream?.close()]);
});

beforeEach(() => {
  upstream.calls.length = 0;
});

function call(token: string, method: string, path: string, body?: unknown): Promise<Response> {
  return fetch(`${server.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

describe("a non-admin cannot reach what the providers keep under the server's key", () => {
  it.each([
    ['list the stored chat completions', 'GET', '/proxy/beta/v1/chat/completions?limit=100', undefined],
    ['read a stored chat completion', 'GET', '/proxy/beta/v1/chat/completions/chatcmpl-alice', undefined],
    ["read another user's response by id", 'GET', '/proxy/beta/v1/responses/resp_alice', undefined],
    ['list its input items', 'GET', '/proxy/beta/v1/responses/resp_alice/input_items', undefined],
    ['delete it', 'DELETE', '/proxy/beta/v1/responses/resp_alice', undefined],
    ['continue it', 'POST', '/proxy/beta/v1/responses', { model: 'gpt-4o-mini', input: 'go on', previous_response_id: 'resp_alice' }],
    ['continue a stored conversation', 'POST', '/proxy/beta/v1/responses', { model: 'gpt-4o-mini', input: 'go on', conversation: 'conv_alice' }],
    ["count another user's response's input", 'POST', '/proxy/beta/v1/responses/input_tokens', { model: 'gpt-4o-mini', input: 'go on', previous_response_id: 'resp_alice' }],
    ["count a stored conversation's input", 'POST', '/proxy/beta/v1/responses/input_tokens', { model: 'gpt-4o-mini', input: 'go on', conversation: 'conv_alice' }],
    ['list the files', 'GET', '/proxy/beta/v1/files', undefined],
    ['read a batch', 'GET', '/proxy/beta/v1/batches/batch_alice', undefined],
    ["list Anthropic's message batches", 'GET', '/proxy/gamma-direct/v1/messages/batches', undefined],
    ["read Anthropic's files", 'GET', '/proxy/gamma-direct/v1/files/file_alice/content', undefined],
  ])('%s: 403 stored_objects_admin_only, nothing forwarded', async (_what, method, path, body) => {
    const res = await call(bob, method, path, body);
    const answer = (await res.json()) as { error: { code: string; message: string } };
    expect(res.status, answer.error.message).toBe(403);
    expect(answer.error.code).toBe('stored_objects_admin_only');
    expect(answer.error.message).toMatch(/which every user of this server shares through its key: only server\.auth\.admins may/);
    expect(upstream.calls).toHaveLength(0);
  });

  it('/v1/responses does not hand an unknown previous_response_id to OpenAI for a non-admin', async () => {
    const res = await call(bob, 'POST', '/v1/responses', { model: 'gpt-4o-mini', input: 'go on', previous_response_id: 'resp_alice' });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: { code: 'previous_response_not_found', param: 'previous_response_id' } });
    const conversation = await call(bob, 'POST', '/v1/responses', { model: 'gpt-4o-mini', input: 'go on', conversation: 'conv_alice' });
    expect(conversation.status).toBe(400);
    expect(await conversation.json()).toMatchObject({ error: { param: 'conversation' } });
    expect(upstream.calls).toHaveLength(0);
  });

  it("/v1/responses/input_tokens does not hand OpenAI another user's response or conversation to count for a non-admin", async () => {
    for (const [param, value] of [
      ['previous_response_id', 'resp_alice'],
      ['conversation', 'conv_alice'],
    ] as const) {
      const res = await call(bob, 'POST', '/v1/responses/input_tokens', { model: 'gpt-4o-mini', input: 'go on', [param]: value });
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({ error: { param } });
    }
    expect(upstream.calls).toHaveLength(0);
  });

  it('his own calls go through as before', async () => {
    const res = await call(bob, 'POST', '/proxy/beta/v1/chat/completions', { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] });
    expect(res.status).toBe(200);
    expect(upstream.calls.map((c) => c.path)).toEqual(['/v1/chat/completions']);
  });
});

describe('an admin still can', () => {
  it('list the stored chat completions and continue a response at OpenAI', async () => {
    expect((await call(admin, 'GET', '/proxy/beta/v1/chat/completions?limit=100')).status).toBe(200);
    expect((await call(admin, 'POST', '/proxy/beta/v1/responses', { model: 'gpt-4o-mini', input: 'go on', previous_response_id: 'resp_alice' })).status).toBe(200);
    expect(upstream.calls.map((c) => `${c.method} ${c.path}`)).toEqual(['GET /v1/chat/completions?limit=100', 'POST /v1/responses']);
  });
});
