// Calls the sidecar from inside the app container, the way an application would: through the SDK base URL the
// webhook injected (OPENAI_BASE_URL, tollgate.dev/inject-env) and the sidecar's local API. Prints one JSON
// line for the test to read.
//
//   client.ts call [MODEL] [USER]           one chat completion; prints status, X-Proxy-* headers, body
//   client.ts traces [LIMIT]                the sidecar's latest spans (GET /_local/api/traces)
//   client.ts load REQUESTS CONCURRENCY     a short load, every other call streamed; prints counts by status
//                                           and the elapsed time
//   client.ts connect HOST PORT             a TCP connection attempt; prints ok or the error code
//   client.ts steady INTERVAL_MS USER       one call after another (every other streamed), a new one every
//                                           INTERVAL_MS at most, until stdin closes; prints the counts by
//                                           status and the first failures
//   client.ts spend                         calls and cost per user in the sidecar's span store (/_local/api/spend)

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
  const res = await chat(args[0] ?? 'gpt-4o-mini', args[1] ?? 'node-test');
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
} else if (command === 'steady') {
  const interval = Number(args[0] ?? 100);
  const user = args[1] ?? 'steady';
  let stopping = false;
  // The test ends the run by closing `kubectl exec -i`'s stdin.
  process.stdin.on('end', () => (stopping = true)).resume();
  const statuses: Record<string, number> = {};
  const failures: Array<{ n: number; status: string; body: string }> = [];
  const started = performance.now();
  let n = 0;
  while (!stopping) {
    const begun = performance.now();
    let status: string;
    let body = '';
    try {
      const res = await chat('gpt-4o-mini', user, n % 2 === 1);
      body = await res.text();
      status = String(res.status);
    } catch (err) {
      status = err instanceof Error ? err.name : 'error';
      body = err instanceof Error ? err.message : String(err);
    }
    statuses[status] = (statuses[status] ?? 0) + 1;
    if (status !== '200' && failures.length < 5) failures.push({ n, status, body: body.slice(0, 300) });
    n += 1;
    const left = interval - (performance.now() - begun);
    if (left > 0 && !stopping) await new Promise((resolve) => setTimeout(resolve, left));
  }
  console.log(JSON.stringify({ total: n, statuses, failures, elapsedMs: Math.round(performance.now() - started) }));
} else if (command === 'spend') {
  const res = await fetch(`${sidecar}/_local/api/spend?groupBy=user&since=1d&limit=1000`, { signal: AbortSignal.timeout(10_000) });
  const report = (await res.json()) as { rows: Array<{ key: string | null; calls: number; cost_usd: number }> };
  console.log(JSON.stringify({ status: res.status, rows: report.rows }));
} else {
  console.error(`client: unknown command ${command} (call, traces, load, connect, steady, spend)`);
  process.exit(2);
}
