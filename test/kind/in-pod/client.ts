// Calls the sidecar from inside the app container, the way an application would: through the SDK base URL the
// webhook injected (OPENAI_BASE_URL, tollgate.dev/inject-env), or with --v1 through the sidecar's /v1 gateway
// (where model aliases are served), and the sidecar's local API. Prints one JSON line for the test to read.
//
//   client.ts call [MODEL] [USER] [--v1]    one chat completion; prints status, X-Proxy-* headers, body
//   client.ts traces [LIMIT]                the sidecar's latest spans (GET /_local/api/traces)
//   client.ts load REQUESTS CONCURRENCY     a short load, every other call streamed; prints counts by status
//                                           and the elapsed time
//   client.ts connect HOST PORT [HOLD_MS]   a TCP connection attempt, held open HOLD_MS (default 0); prints ok or
//                                           the error code
//   client.ts kept-alive COUNT [USER] [HOLD_MS]  COUNT chat completions one after another on one kept-alive connection, then held open HOLD_MS;
//                                           prints each call's status and span id, and the local ports used
//   client.ts steady INTERVAL_MS USER       one call after another (every other streamed), a new one every
//                                           INTERVAL_MS at most, until stdin closes; prints the counts by
//                                           status and the first failures
//   client.ts calls INTERVAL_MS MODEL USER [--v1]
//                                           the same for MODEL, every call recorded: when it started, how long
//                                           it took, its outcome, its span id and its answer's text (which
//                                           upstream wrote it); a stream is answered only when it ends with
//                                           [DONE] and carries no error event
//   client.ts spend [GROUP_BY] [SINCE]      calls and cost per user (or model, …) in the sidecar's span store
//                                           (/_local/api/spend), since 1d or an ISO time
//   client.ts health                        the sidecar's /_local/api/health (budgets: policies, pending reports)

const baseUrl = process.env.OPENAI_BASE_URL;
if (!baseUrl) {
  console.error('client: OPENAI_BASE_URL is not set; was tollgate.dev/inject-env honoured?');
  process.exit(2);
}
const sidecar = new URL(baseUrl).origin;
const v1 = process.argv.includes('--v1');
const chatUrl = `${v1 ? `${sidecar}/v1` : baseUrl}/chat/completions`;

async function chat(model: string, user: string, stream = false): Promise<Response> {
  return fetch(chatUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-tollgate-user': user },
    body: JSON.stringify({ model, stream, messages: [{ role: 'user', content: 'Say hello from a real node' }] }),
    signal: AbortSignal.timeout(30_000),
  });
}

/**
 * Calls `one(n)` one after another, a new one every `interval` ms at most, until stdin closes (the test ends
 * the run by closing `kubectl exec -i`'s stdin).
 */
async function untilStdinCloses(interval: number, one: (n: number) => Promise<void>): Promise<{ total: number; elapsedMs: number }> {
  let stopping = false;
  process.stdin.on('end', () => (stopping = true)).resume();
  const started = performance.now();
  let n = 0;
  while (!stopping) {
    const begun = performance.now();
    await one(n);
    n += 1;
    const left = interval - (performance.now() - begun);
    if (left > 0 && !stopping) await new Promise((resolve) => setTimeout(resolve, left));
  }
  return { total: n, elapsedMs: Math.round(performance.now() - started) };
}

/** A chat completion's outcome as an application sees it, and the text of its answer (streamed or not). */
async function answerOf(res: Response, stream: boolean): Promise<{ outcome: string; text: string; body: string }> {
  const body = await res.text();
  if (res.status !== 200) return { outcome: String(res.status), text: '', body };
  if (!stream) return { outcome: '200', text: (JSON.parse(body) as { choices: Array<{ message: { content: string } }> }).choices[0]!.message.content, body };
  const events = body
    .split('\n')
    .filter((line) => line.startsWith('data: '))
    .map((line) => line.slice(6));
  const chunks = events.filter((e) => e !== '[DONE]').map((e) => JSON.parse(e) as { error?: unknown; choices?: Array<{ delta?: { content?: string } }> });
  const text = chunks.map((c) => c.choices?.[0]?.delta?.content ?? '').join('');
  if (chunks.some((c) => c.error !== undefined)) return { outcome: 'stream error', text, body };
  return { outcome: events.at(-1) === '[DONE]' ? '200' : 'stream cut', text, body };
}

const [command = 'call', ...args] = process.argv.slice(2).filter((arg) => arg !== '--v1');
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
      socket.setTimeout(0);
      setTimeout(
        () => {
          socket.destroy();
          resolve({ ok: true });
        },
        Number(args[2] ?? 0),
      );
    });
    socket.once('timeout', () => {
      socket.destroy();
      resolve({ ok: false, error: 'TIMEOUT' });
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve({ ok: false, error: err.code }));
  });
  console.log(JSON.stringify(result));
} else if (command === 'kept-alive') {
  const { Agent, request } = await import('node:http');
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const ports = new Set<number>();
  const calls: Array<{ status: number; spanId: string | null }> = [];
  for (let n = 0; n < Number(args[0] ?? 3); n++) {
    calls.push(
      await new Promise((resolve, reject) => {
        const req = request(chatUrl, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'x-tollgate-user': args[1] ?? 'kept-alive' } }, (res) => {
          res.resume().once('end', () => resolve({ status: res.statusCode ?? 0, spanId: (res.headers['x-proxy-span-id'] as string | undefined) ?? null }));
        });
        req.once('socket', (socket) => (socket.localPort ? ports.add(socket.localPort) : socket.once('connect', () => ports.add(socket.localPort!))));
        req.once('error', reject);
        req.end(JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Say hello from a kept-alive connection' }] }));
      }),
    );
  }
  // Held open like an agent's connection between turns: an observer that polls (the kind node agent) sees a
  // connection only if it outlives a poll.
  await new Promise((resolve) => setTimeout(resolve, Number(args[2] ?? 0)));
  agent.destroy();
  console.log(JSON.stringify({ calls, localPorts: [...ports] }));
} else if (command === 'steady') {
  const user = args[1] ?? 'steady';
  const statuses: Record<string, number> = {};
  const failures: Array<{ n: number; status: string; body: string }> = [];
  const run = await untilStdinCloses(Number(args[0] ?? 100), async (n) => {
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
  });
  console.log(JSON.stringify({ total: run.total, statuses, failures, elapsedMs: run.elapsedMs }));
} else if (command === 'calls') {
  const [interval = '100', model = 'gpt-4o-mini', user = 'calls'] = args;
  const calls: Array<{ n: number; at: number; ms: number; outcome: string; spanId: string | null; text: string; body?: string }> = [];
  const run = await untilStdinCloses(Number(interval), async (n) => {
    const at = Date.now();
    const begun = performance.now();
    let answer: { outcome: string; text: string; body: string };
    let spanId: string | null = null;
    try {
      const res = await chat(model, user, n % 2 === 1);
      spanId = res.headers.get('x-proxy-span-id');
      answer = await answerOf(res, n % 2 === 1);
    } catch (err) {
      answer = { outcome: err instanceof Error ? err.name : 'error', text: '', body: err instanceof Error ? err.message : String(err) };
    }
    const ms = Math.round(performance.now() - begun);
    calls.push({ n, at, ms, outcome: answer.outcome, spanId, text: answer.text, ...(answer.outcome === '200' ? {} : { body: answer.body.slice(0, 300) }) });
  });
  console.log(JSON.stringify({ total: run.total, calls, elapsedMs: run.elapsedMs }));
} else if (command === 'spend') {
  const query = new URLSearchParams({ groupBy: args[0] ?? 'user', since: args[1] ?? '1d', limit: '1000' });
  const res = await fetch(`${sidecar}/_local/api/spend?${query.toString()}`, { signal: AbortSignal.timeout(10_000) });
  const report = (await res.json()) as { rows: Array<{ key: string | null; calls: number; cost_usd: number }> };
  console.log(JSON.stringify({ status: res.status, rows: report.rows }));
} else if (command === 'health') {
  const res = await fetch(`${sidecar}/_local/api/health`, { signal: AbortSignal.timeout(10_000) });
  console.log(JSON.stringify({ status: res.status, body: await res.json() }));
} else {
  console.error(`client: unknown command ${command} (call, traces, load, connect, kept-alive, steady, calls, spend, health)`);
  process.exit(2);
}
