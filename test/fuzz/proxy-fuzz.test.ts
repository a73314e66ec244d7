// A bounded, seeded fuzz run against a real `tollgate proxy` process, part of the normal suite. Two targets:
//
// - the config API: generated and damaged bodies for POST /_local/api/config. Whatever comes in, the answer
//   is 200 or a 4xx in the engine's error shape, a refusal leaves the revision where it was, and calls made
//   with whatever config was accepted are answered and costed finitely;
// - the stream parsers, through the proxy: every usage extractor's wire format, damaged and delivered in random
//   pieces, on the native routes (whose bytes must reach the caller unchanged) and through the /v1 gateway's
//   translators. Every call leaves a span with plausible tokens and a finite cost.
//
// After each target the process must still be up and healthy. Longer runs (the seed and the case number of a
// failure are in its message, to replay it):
//   TOLLGATE_FUZZ_ITERATIONS=5000 TOLLGATE_FUZZ_SEED=42 ./tollgatew npx vitest run test/fuzz

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProxyProcess, type ProxyProcess } from '../e2e/proxy-process.ts';
import { startFakeMetadataServer, type FakeMetadataServer } from '../fakes/google-token-endpoints.ts';
import { configBody } from './config-bodies.ts';
import { fuzzSettings, seededRandom } from './seeded-random.ts';
import { upstreamAnswer, type StreamFormat, type UpstreamAnswer } from './stream-bodies.ts';
import { waitFor } from '../support/wait-for.ts';

// Cases per target by default: config bodies are cheap, streams cost a call each. Seconds in all.
const { seed, iterations: configCases } = fuzzSettings(300);
const { iterations: streamCases } = fuzzSettings(100);
const MAX_TOKENS = 100_000_000;

let upstream: Server;
let base: string;
let answer: UpstreamAnswer | null = null;
let metadata: FakeMetadataServer;
let proxy: ProxyProcess;

beforeAll(async () => {
  // Answers every request with the next prepared answer, written piece by piece across event-loop turns.
  upstream = createServer((req, res) => {
    req.resume();
    const respond = async () => {
      const next = answer ?? { contentType: 'application/json', body: Buffer.from('{}'), pieces: [Buffer.from('{}')] };
      res.writeHead(200, next.contentType === null ? {} : { 'content-type': next.contentType });
      for (const piece of next.pieces) {
        if (!res.write(piece)) await new Promise((resolve) => res.once('drain', resolve));
        if (piece.length < 16) await new Promise((resolve) => setImmediate(resolve));
      }
      res.end();
    };
    req.once('end', () => {
      respond().catch((error: unknown) => res.destroy(error instanceof Error ? error : new Error(String(error))));
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/base`;
  metadata = await startFakeMetadataServer({ projectId: 'fuzz' });
});

afterAll(async () => {
  await metadata?.close();
  await new Promise((resolve) => upstream?.close(resolve));
});

/** A fresh proxy for each target, so what the config target accepted does not steer the other. */
async function withFuzzedProxy(run: () => Promise<void>): Promise<void> {
  proxy = await startProxyProcess({
    configYaml: `
upstreams:
  beta: { baseUrl: "${base}" }
  gamma-direct: { baseUrl: "${base}" }
  alpha: { baseUrl: "${base}", project: fuzz, location: us-central1 }
  gamma-cloudb: { baseUrl: "${base}", region: us-east-1 }
breaker: { consecutiveFailures: 10000, minimumRequests: 1000000 }
storage: { kind: sqlite, path: spans.db }
`,
    env: {
      OPENAI_API_KEY: 'sk-fuzz',
      ANTHROPIC_API_KEY: 'sk-ant-fuzz',
      GCE_METADATA_HOST: metadata.host,
      AWS_ACCESS_KEY_ID: 'AKIDFUZZ',
      AWS_SECRET_ACCESS_KEY: 'fuzz-secret',
      AWS_REGION: 'us-east-1',
      TOLLGATE_LOG_LEVEL: 'warn',
    },
  });
  try {
    await run();
  } finally {
    await proxy.stop();
  }
}

async function stillServing(): Promise<void> {
  expect(proxy.child.exitCode, `the proxy exited: ${proxy.stderr()}`).toBeNull();
  expect((await fetch(`${proxy.url}/healthz`)).status).toBe(200);
}

/** A request to the proxy; when it fails because the process is gone, the failure says so, with its stderr. */
async function alive<T>(where: string, request: Promise<T>): Promise<T> {
  try {
    return await request;
  } catch (error) {
    // A request that failed because the process died fails before the exit is reported: give the exit its moment.
    await waitFor('the proxy to exit', () => proxy.child.exitCode !== null, 100).catch(() => undefined);
    expect(proxy.child.exitCode, `${where}: the proxy exited: ${proxy.stderr().slice(0, 2000)}`).toBeNull();
    throw error;
  }
}

async function revision(where: string): Promise<number> {
  return ((await (await alive(where, fetch(`${proxy.url}/_local/api/config`))).json()) as { revision: number }).revision;
}

/** The spans of these request ids, read from the span file once the writer has stored them all. */
async function spansOf(requestIds: string[]): Promise<Record<string, number | string | null>[]> {
  const db = new Database(join(proxy.dir, 'spans.db'), { readonly: true });
  try {
    const select = db.prepare(`SELECT * FROM spans WHERE request_id IN (${requestIds.map(() => '?').join(',')})`);
    let rows: Record<string, number | string | null>[] = [];
    await waitFor('the spans', () => (rows = select.all(...requestIds) as typeof rows).length >= requestIds.length, 10_000).catch(() => undefined);
    return rows;
  } finally {
    db.close();
  }
}

function expectPlausible(span: Record<string, number | string | null>, where: string): void {
  for (const column of [
    'gen_ai_usage_input_tokens',
    'gen_ai_usage_output_tokens',
    'gen_ai_total_tokens',
    'gen_ai_usage_cache_read_input_tokens',
    'gen_ai_usage_reasoning_tokens',
  ]) {
    const value = span[column] as number;
    expect(Number.isInteger(value) && value >= 0 && value <= MAX_TOKENS, `${where}: ${column} = ${value}`).toBe(true);
  }
  const cost = span.gen_ai_cost_usd as number;
  expect(Number.isFinite(cost) && cost >= 0, `${where}: cost ${cost}`).toBe(true);
}

describe(`fuzz (seed ${seed}, ${configCases} config bodies, ${streamCases} streams)`, () => {
  it('the config API answers every body with 200 or a 4xx in the engine shape, and a refusal changes nothing', () =>
    withFuzzedProxy(async () => {
      const random = seededRandom(seed);
      const callIds: string[] = [];
      // Calls made under the fuzzed config report usage, so whatever prices were accepted get used.
      const completion = Buffer.from(
        JSON.stringify({
          id: 'c1',
          object: 'chat.completion',
          model: 'gpt-4o-mini',
          choices: [],
          usage: { prompt_tokens: 1200, completion_tokens: 300, total_tokens: 1500, prompt_tokens_details: { cached_tokens: 1024 } },
        }),
      );
      answer = { contentType: 'application/json', body: completion, pieces: [completion] };
      for (let i = 0; i < configCases; i++) {
        const where = `config case ${i} (TOLLGATE_FUZZ_SEED=${seed})`;
        const body = configBody(random);
        const before = await revision(where);
        const res = await alive(where, fetch(`${proxy.url}/_local/api/config`, { method: 'POST', headers: { 'content-type': 'application/json' }, body }));
        const text = await res.text();
        expect([200, 400, 413], `${where}: status ${res.status} for ${body.slice(0, 300)}: ${text.slice(0, 300)}`).toContain(res.status);
        const answer = JSON.parse(text) as { revision?: number; error?: { code?: unknown; message?: unknown } };
        if (res.status === 200) {
          expect(typeof answer.revision, where).toBe('number');
          // whatever was accepted, a call is answered (the upstream may now be elsewhere) and metered
          const id = `fuzz-config-${seed}-${i}`;
          callIds.push(id);
          const call = await alive(
            where,
            fetch(`${proxy.url}/proxy/beta/v1/chat/completions`, {
              method: 'POST',
              headers: { 'content-type': 'application/json', 'x-request-id': id },
              body: JSON.stringify({
                model: random.chance(0.7) ? 'gpt-4o-mini' : random.pick(['GPT-4o-mini', 'constructor', 'gpt-4o']),
                messages: [{ role: 'user', content: 'hi' }],
              }),
            }),
          );
          await call.arrayBuffer();
          // a fault in a response listener would take the process down just after this answer
          await new Promise((resolve) => setImmediate(resolve));
        } else {
          expect(typeof answer.error?.code, `${where}: ${text}`).toBe('string');
          expect(typeof answer.error?.message, `${where}: ${text}`).toBe('string');
          expect(await revision(where), `${where}: a refused body changed the config: ${body.slice(0, 300)}`).toBe(before);
        }
        if (i % 20 === 19) await stillServing();
      }
      for (const span of await spansOf(callIds)) expectPlausible(span, `config call ${String(span.request_id)}`);
      await stillServing();
    }));

  it('the stream parsers, through the proxy: native routes pass every byte through, every call is metered plausibly', () =>
    withFuzzedProxy(async () => {
      const random = seededRandom(seed ^ 0x5eed);
      const targets: { path: string; body: unknown; formats: StreamFormat[]; passThrough: boolean }[] = [
        {
          path: '/proxy/beta/v1/chat/completions',
          body: { model: 'gpt-4o-mini', stream: true, stream_options: { include_usage: true }, messages: [] },
          formats: ['openai-sse', 'openai-json'],
          passThrough: true,
        },
        {
          path: '/proxy/gamma-direct/v1/messages',
          body: { model: 'claude-sonnet-4-20250514', stream: true, max_tokens: 10, messages: [] },
          formats: ['anthropic-sse', 'anthropic-json'],
          passThrough: true,
        },
        {
          path: '/proxy/alpha/v1/projects/fuzz/locations/us-central1/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse',
          body: { contents: [] },
          formats: ['gemini-sse'],
          passThrough: true,
        },
        {
          path: '/proxy/alpha/v1/projects/fuzz/locations/us-central1/publishers/google/models/gemini-2.5-flash:streamGenerateContent',
          body: { contents: [] },
          formats: ['gemini-array'],
          passThrough: true,
        },
        {
          path: '/proxy/gamma-cloudb/model/anthropic.claude-sonnet-4-20250514-v1:0/invoke-with-response-stream',
          body: { anthropic_version: 'bedrock-2023-05-31', max_tokens: 10, messages: [] },
          formats: ['bedrock-stream'],
          passThrough: true,
        },
        {
          path: '/v1/chat/completions',
          body: { model: 'claude-sonnet-4', stream: true, messages: [{ role: 'user', content: 'hi' }] },
          formats: ['anthropic-sse'],
          passThrough: false,
        },
        {
          path: '/v1/chat/completions',
          body: { model: 'gemini-2.5-flash', stream: true, messages: [{ role: 'user', content: 'hi' }] },
          formats: ['gemini-sse'],
          passThrough: false,
        },
      ];
      const ids: string[] = [];
      for (let i = 0; i < streamCases; i++) {
        const target = random.pick(targets);
        const format = random.pick(target.formats);
        answer = upstreamAnswer(format, random);
        const where = `stream case ${i} (${format} on ${target.path.split('/').slice(0, 3).join('/')}, TOLLGATE_FUZZ_SEED=${seed})`;
        const id = `fuzz-stream-${seed}-${i}`;
        ids.push(id);
        let received: Buffer | Error;
        let status = 0;
        try {
          const res = await fetch(`${proxy.url}${target.path}`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'x-request-id': id },
            body: JSON.stringify(target.body),
          });
          status = res.status;
          received = Buffer.from(await res.arrayBuffer());
        } catch (error) {
          received = error as Error;
        }
        if (target.passThrough) {
          expect(status, where).toBe(200);
          expect(received instanceof Buffer && received.equals(answer.body), `${where}: the caller did not get the upstream's bytes`).toBe(true);
        }
        if (i % 20 === 19) await stillServing();
      }
      const spans = await spansOf(ids);
      expect(spans.map((s) => s.request_id).sort()).toEqual([...ids].sort());
      for (const span of spans) {
        expect(['ok', 'error'], `${String(span.request_id)}: status ${String(span.status)} (${String(span.error)})`).toContain(span.status);
        expectPlausible(span, String(span.request_id));
      }
      await stillServing();
    }));
});
