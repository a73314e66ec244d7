// The management API has no authentication, so what it may change is limited to what cannot hand out a
// credential. `{"credentials":{"openaiApiKeyFile":"/any/file"}}` used to make the proxy send that file's
// contents as the OpenAI key; a credentials file that is not JSON put its first characters into the 502, the
// span and the log. The API also takes JSON only, says no to a key given twice and to a model listed twice
// in different case, and leaves the revision alone when nothing changes.

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { chat, OPENAI_KEY, postJson, startSecurityBed, type SecurityBed } from './security-bed.ts';

const SECRET = 'sk-live-SOMEONE-ELSES-SECRET-0123456789';
let dir: string;
let secretFile: string;
let bed: SecurityBed;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tollgate-secret-'));
  secretFile = join(dir, 'not-a-credential.txt');
  writeFileSync(secretFile, `${SECRET}\nmore private text\n`);
  // The config file may name credential files (the operator's choice); this one names the wrong file.
  bed = await startSecurityBed({ configYaml: `credentials: { googleCredentialsFile: "${secretFile}" }` });
});

afterAll(async () => {
  await bed?.close();
  rmSync(dir, { recursive: true, force: true });
});

afterEach(() => {
  bed.upstream.calls.length = 0;
});

async function config(): Promise<{ revision: number; config: { credentials: Record<string, string> } }> {
  return (await (await fetch(`${bed.proxy.url}/_local/api/config`)).json()) as { revision: number; config: { credentials: Record<string, string> } };
}

async function refusal(res: Response): Promise<{ code: string; message: string }> {
  return ((await res.json()) as { error: { code: string; message: string } }).error;
}

describe('credentials cannot be set through the API', () => {
  it("a key file path is refused naming the field, and calls keep the proxy's own key", async () => {
    const before = await config();
    const res = await postJson(bed, '/_local/api/config', { credentials: { openaiApiKeyFile: secretFile } });
    expect(res.status).toBe(400);
    expect(await refusal(res)).toMatchObject({ code: 'invalid_config', message: expect.stringMatching(/^credentials cannot be set through this API/) });
    expect(await config()).toEqual(before);
    expect((await postJson(bed, '/proxy/beta/v1/chat/completions', chat)).status).toBe(200);
    expect(bed.upstream.calls[0]!.headers.authorization).toBe(`Bearer ${OPENAI_KEY}`);
  });

  it('not even beside valid sections: nothing of the change is applied', async () => {
    const before = await config();
    const res = await postJson(bed, '/_local/api/config', { breaker: { openMs: 50 }, credentials: { anthropicApiKeyFile: secretFile } });
    expect(res.status).toBe(400);
    expect(await config()).toEqual(before);
  });
});

describe('the OTLP export cannot be redirected through the API', () => {
  it('a tracing section is refused naming it, and nothing changes', async () => {
    const before = await config();
    const res = await postJson(bed, '/_local/api/config', { breaker: { openMs: 50 }, tracing: { otlp: { endpoint: 'http://collector.attacker.example:4318' } } });
    expect(res.status).toBe(400);
    expect(await refusal(res)).toMatchObject({ code: 'invalid_config', message: expect.stringMatching(/^tracing cannot be set through this API/) });
    expect(await config()).toEqual(before);
  });

  it('so is the per-user metrics switch, which would let callers add series', async () => {
    const res = await postJson(bed, '/_local/api/config', { metrics: { perUser: { enabled: true } } });
    expect(res.status).toBe(400);
    expect((await refusal(res)).message).toContain('metrics is not a known field');
  });
});

describe('errors never quote a credentials file', () => {
  it('a Google credentials file that is not JSON fails the call naming the file, not its contents', async () => {
    const res = await fetch(`${bed.proxy.url}/proxy/alpha/v1/projects/security-test/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }),
    });
    expect(res.status).toBe(502);
    const body = await res.text();
    expect(body).toContain(`Google credentials file ${secretFile} is not JSON`);
    const span = await bed.span(res.headers.get('x-proxy-span-id'));
    expect(span?.error).toMatch(/^credential_unavailable: /);
    for (const text of [body, JSON.stringify(span), bed.proxy.logs.map((line) => JSON.stringify(line)).join('\n'), bed.proxy.stderr()]) {
      expect(text).not.toContain(SECRET.slice(0, 7));
    }
    expect(bed.upstream.calls).toEqual([]);
  });
});

describe('what the API accepts', () => {
  it('a key given twice is refused, with the place it is given twice', async () => {
    const before = await config();
    const res = await fetch(`${bed.proxy.url}/_local/api/config`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"breaker":{"openMs":100},"breaker":{"openMs":200000}}',
    });
    expect(res.status).toBe(400);
    expect(await refusal(res)).toEqual({ code: 'invalid_request', message: 'the body has the key "breaker" twice; each key may appear once' });
    expect(await config()).toEqual(before);
  });

  it('two price entries for one model in different case are refused like an exact repeat', async () => {
    const entry = (model: string, price: number) => ({ provider: 'openai', model, input_per_million: price, output_per_million: price });
    const res = await postJson(bed, '/_local/api/config', { pricing: { models: [entry('gpt-4o-mini', 1), entry('GPT-4o-mini', 1000)] } });
    expect(res.status).toBe(400);
    expect((await refusal(res)).message).toMatch(/^pricing\.models\[1\] repeats provider openai model GPT-4o-mini/);
  });

  it('a change that changes nothing keeps the revision', async () => {
    const { revision } = await config();
    for (const body of [{}, { breaker: { openMs: 10_000 } }]) {
      const res = await postJson(bed, '/_local/api/config', body);
      expect(res.status).toBe(200);
      expect(((await res.json()) as { revision: number }).revision).toBe(revision);
    }
    const changed = await postJson(bed, '/_local/api/config', { breaker: { openMs: 11_000 } });
    expect(((await changed.json()) as { revision: number }).revision).toBe(revision + 1);
  });
});
