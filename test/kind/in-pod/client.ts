// Calls the sidecar from inside the app container, the way an application would: through the SDK base URL the
// webhook injected (OPENAI_BASE_URL, tollgate.dev/inject-env) and the sidecar's local API. Prints one JSON
// line for the test to read.
//
//   client.ts call [MODEL]                  one chat completion; prints status, X-Proxy-* headers, body
//   client.ts traces [LIMIT]                the sidecar's latest spans (GET /_local/api/traces)
//   client.ts load REQUESTS CONCURRENCY     a short load, every other call streamed; prints counts by status
//                                           and the elapsed time
//   client.ts connect HOST PORT             a TCP connection attempt; prints ok or the error code

const baseUrl = process.env.OPENAI_BASE_URL;
if (!baseUrl) {
  console.error('client: OPENAI_BASE_URL is not set; was tollgate.dev/inject-env honoured?');
  process.exit(2);
}
const sidecar = new URL(baseUrl).origin;

async function chat(model: string, user: string, stream = false): Promise<Response> {
  return fetch(`${baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-tollgate-user': user },
    body: JSON.stringify({ model, stream, messages: [{ role: 'user', content: 'Say hello from a real node' }] }),
    signal: AbortSignal.timeout(30_000),
  });
}

const [command = 'call', ...args] = process.argv.slice(2);
if (command === 'call') {
  const res = await chat(args[0] ?? 'gpt-4o-mini', 'node-test');
  const headers = Object.fromEntries([...res.headers].filter(([k]) => k.startsWith('x-proxy-')));
  console.log(JSON.stringify({ status: res.status, headers, body: await res.text() }));
} else if (command === 'traces') {
  const res = await fetch(`${sidecar}/_local/api/traces?limit=${Number(args[0] ?? 20)}`, { signal: AbortSignal.timeout(10_000) });
  console.log(JSON.stringify({ status: res.status, body: await res.json() }));
} else if (command === 'load') {
  const total = Number(args[0] ?? 200);
  const concurrency = Number(args[1] ?? 8);
  const statuses: Record<string, number> = {};
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < total) {
        const n = next++;
        let key: string;
        try {
          const res = await chat('gpt-4o-mini', `load-${n % 16}`, n % 2 === 1);
          await res.arrayBuffer();
          key = String(res.status);
        } catch (err) {
          key = err instanceof Error ? err.name : 'error';
        }
        statuses[key] = (statuses[key] ?? 0) + 1;
      }
    }),
  );
  console.log(JSON.stringify({ total, concurrency, statuses, elapsedMs: Math.round(performance.now() - started) }));
} else if (command === 'connect') {
  const { connect } = await import('node:net');
  const result = await new Promise<Record<string, unknown>>((resolve) => {
    const socket = connect({ host: args[0]!, port: Number(args[1]), timeout: 5_000 });
    socket.once('connect', () => {
      socket.destroy();
      resolve({ ok: true });
    });
    socket.once('timeout', () => {
      socket.destroy();
      resolve({ ok: false, error: 'TIMEOUT' });
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve({ ok: false, error: err.code }));
  });
  console.log(JSON.stringify(result));
} else {
  console.error(`client: unknown command ${command} (call, traces, load, connect)`);
  process.exit(2);
}
