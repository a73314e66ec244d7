// A remote span store that goes away under load: the BigQuery or Firestore emulator is stopped while a proxy
// serves calls. Calls keep succeeding and /healthz stays 200; the writer logs each failed write and retries it
// with backoff; spans past the bounded buffer are dropped, counted and logged; once the emulator is back (empty,
// as after losing the table) writes resume, and every recorded span is either written or counted as dropped.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type BigQueryEmulator, startBigQueryEmulator } from '../emulators/bigquery.ts';
import { type FirestoreEmulator, startFirestoreEmulator } from '../emulators/firestore.ts';
import { type FakeUpstream, startFakeUpstream } from '../fakes/llm-upstream.ts';
import { waitFor } from '../support/wait-for.ts';
import { startProxyProcess, type ProxyProcess } from './proxy-process.ts';

const OPENAI_KEY = 'sk-openai-faults';
let upstream: FakeUpstream;

beforeAll(async () => {
  upstream = await startFakeUpstream('openai', { expectApiKey: OPENAI_KEY });
  upstream.behave({ usage: { input: 100, output: 10 } });
});
afterAll(async () => {
  await upstream?.close();
});

interface SpansHealth {
  recorded: number;
  written: number;
  dropped: number;
  buffered: number;
  writeErrors: number;
  lastWriteError: { message: string } | null;
}

async function spansHealth(proxy: ProxyProcess): Promise<SpansHealth> {
  return ((await (await fetch(`${proxy.url}/_local/api/health`)).json()) as { spans: SpansHealth }).spans;
}

async function callOk(proxy: ProxyProcess, user: string): Promise<void> {
  const res = await fetch(`${proxy.url}/proxy/beta/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-tollgate-user': user },
    body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
  });
  await res.arrayBuffer();
  expect(res.status).toBe(200);
}

/** Calls one after the other, checking /healthz as a probe would, until `until` resolves. */
async function loadUntil(proxy: ProxyProcess, user: string, until: Promise<unknown>): Promise<number> {
  let done = false;
  void until.finally(() => (done = true));
  let calls = 0;
  while (!done) {
    await callOk(proxy, user);
    expect((await fetch(`${proxy.url}/healthz`)).status).toBe(200);
    calls++;
  }
  return calls;
}

const storageTuning = 'bufferSize: 20, batchSize: 5, flushIntervalMs: 50';

async function outage(proxy: ProxyProcess, emulator: { stop(): Promise<void>; restart(): Promise<void> }, storedCount: () => Promise<number>): Promise<void> {
  for (let i = 0; i < 10; i++) await callOk(proxy, 'before');
  await waitFor('the first calls to be stored', async () => (await storedCount().catch(() => 0)) >= 10, 60_000);

  await emulator.stop();
  // Load while the store is down, until the writer has failed, retried and filled its buffer.
  const failing = waitFor(
    'writes to fail and the buffer to overflow',
    async () => {
      const h = await spansHealth(proxy);
      return h.writeErrors >= 2 && h.dropped > 0;
    },
    60_000,
  );
  const during = await loadUntil(proxy, 'during', failing);
  const down = await spansHealth(proxy);
  expect(down.lastWriteError?.message).toBeTruthy();
  await waitFor('the write failure to be logged', () => proxy.logs.some((l) => l.msg === 'failed to write spans; will retry' && l.level === 50));
  await waitFor('the overflow to be logged', () => proxy.logs.some((l) => l.msg === 'span processor buffer full' && typeof l.dropped === 'number'));

  await emulator.restart();
  // The emulator came back empty (as if the table had been dropped): the store sets itself up again.
  for (let i = 0; i < 5; i++) await callOk(proxy, 'after');
  await waitFor('writes to resume', async () => (await storedCount().catch(() => 0)) >= 5 && (await spansHealth(proxy)).buffered === 0, 90_000);
  const after = await spansHealth(proxy);
  // Nothing is lost silently: every call's span is written or counted as dropped.
  expect(after.written + after.dropped).toBe(10 + during + 5);
  expect(after.dropped).toBeGreaterThan(0);
}

describe('a remote span store that goes away under load', () => {
  let bq: BigQueryEmulator;
  let firestore: FirestoreEmulator;
  let proxy: ProxyProcess | undefined;

  beforeAll(async () => {
    [bq, firestore] = await Promise.all([startBigQueryEmulator(), startFirestoreEmulator()]);
  }, 300_000);
  afterAll(async () => {
    await proxy?.stop();
    await Promise.all([bq?.stop(), firestore?.stop()]);
  });

  it('BigQuery: calls succeed throughout, writes are retried, drops counted and logged, writes resume', async () => {
    proxy = await startProxyProcess({
      configYaml: `upstreams:\n  beta: { baseUrl: "${upstream.url}" }\nstorage: { kind: bigquery, ${storageTuning}, bigquery: { projectId: ${bq.projectId}, dataset: faults, table: spans, apiEndpoint: "${bq.endpoint}" } }\n`,
      env: { OPENAI_API_KEY: OPENAI_KEY, METADATA_SERVER_DETECTION: 'none' },
    });
    const count = async () => {
      const [rows] = await bq.client().query('SELECT COUNT(*) AS n FROM faults.spans');
      return Number((rows[0] as { n: number } | undefined)?.n ?? 0);
    };
    await outage(proxy, bq, count);
    await proxy.stop();
    proxy = undefined;
  }, 240_000);

  it('Firestore: calls succeed throughout, writes are retried, drops counted and logged, writes resume', async () => {
    proxy = await startProxyProcess({
      configYaml: `upstreams:\n  beta: { baseUrl: "${upstream.url}" }\nstorage: { kind: firestore, ${storageTuning}, firestore: { projectId: ${firestore.projectId}, collection: faults } }\n`,
      env: { OPENAI_API_KEY: OPENAI_KEY, FIRESTORE_EMULATOR_HOST: firestore.host, METADATA_SERVER_DETECTION: 'none' },
    });
    const { Firestore } = await import('@google-cloud/firestore');
    process.env.FIRESTORE_EMULATOR_HOST = firestore.host;
    const client = new Firestore({ projectId: firestore.projectId });
    const count = async () => (await client.collection('faults').count().get()).data().count;
    try {
      await outage(proxy, firestore, count);
    } finally {
      await client.terminate();
    }
    await proxy.stop();
    proxy = undefined;
  }, 240_000);
});
