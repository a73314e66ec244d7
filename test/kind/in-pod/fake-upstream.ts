// A fake LLM upstream as a pod of the node test: the same fakes the other suites use (test/fakes), OpenAI's by
// default or Anthropic's, listening on the pod IP, with a small control port the test reaches through the API
// server's service proxy (GET /requests: what the fake received, so the test sees the credential the sidecar
// attached). On SIGTERM it stops taking connections, lets the answers it is writing finish, then exits: a
// provider's server going away as a Deployment's pods do.
//
//   node test/kind/in-pod/fake-upstream.ts
//   env: FAKE_API_KEY (required), FAKE_KIND (openai | anthropic), FAKE_BEHAVIOUR (a FakeBehaviour as JSON),
//        FAKE_PORT, CONTROL_PORT

import { createServer } from 'node:http';
import { startFakeUpstream, type FakeBehaviour } from '../../fakes/llm-upstream.ts';

const apiKey = process.env.FAKE_API_KEY;
if (!apiKey) {
  console.error('fake-upstream: FAKE_API_KEY is not set');
  process.exit(2);
}
const KEEP_REQUESTS = 200;
const kind = process.env.FAKE_KIND ?? 'openai';
if (kind !== 'openai' && kind !== 'anthropic') {
  console.error(`fake-upstream: FAKE_KIND must be openai or anthropic (got ${kind})`);
  process.exit(2);
}

const upstream = await startFakeUpstream(kind, { host: '0.0.0.0', port: Number(process.env.FAKE_PORT ?? 8080), expectApiKey: apiKey });
if (process.env.FAKE_BEHAVIOUR) upstream.behave(JSON.parse(process.env.FAKE_BEHAVIOUR) as FakeBehaviour);

const control = createServer((req, res) => {
  const reply = (status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  if (req.method === 'GET' && req.url === '/healthz') return reply(200, { ok: true });
  if (req.method === 'GET' && req.url === '/requests') {
    return reply(
      200,
      upstream.requests.map((r) => ({ method: r.method, path: r.path, headers: r.headers, json: r.json })),
    );
  }
  reply(404, { error: `no ${req.method} ${req.url}` });
});
control.listen(Number(process.env.CONTROL_PORT ?? 9090), '0.0.0.0');

// Load runs send hundreds of calls; only the latest are worth keeping.
setInterval(() => upstream.requests.splice(0, Math.max(0, upstream.requests.length - KEEP_REQUESTS)), 1000).unref();

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    control.close();
    void upstream.drain().finally(() => process.exit(0));
  });
}
console.log(`fake ${kind} upstream on ${upstream.url}, control on :${process.env.CONTROL_PORT ?? 9090}`);
