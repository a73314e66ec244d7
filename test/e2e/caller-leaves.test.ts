// A caller who hangs up on a stream before its usage arrives is still charged what the provider bills: the
// proxy reads on for the usage (ADR 1305). The fakes hold a stream's final events (finish reason, usage, stop)
// until the test releases them, after the caller has gone; the span must carry the provider's counts and cost.

import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findSpan } from '../support/spans.ts';
import { waitFor } from '../support/wait-for.ts';
import { startProxyProcess, type ProxyProcess } from './proxy-process.ts';
import { startUpstreamBed, type UpstreamBed } from './upstream-bed.ts';

let bed: UpstreamBed;
let proxy: ProxyProcess;

beforeAll(async () => {
  bed = await startUpstreamBed();
  proxy = await startProxyProcess({ env: bed.env, configYaml: bed.configYaml() });
});

afterAll(async () => {
  await proxy?.stop();
  await bed?.close();
});

/**
 * Starts a streamed call, reads its first bytes and hangs up (the socket destroyed, as a killed client's is);
 * resolves with the call's span id once the proxy has noticed.
 */
async function callAndHangUp(path: string, body: unknown): Promise<string> {
  const payload = JSON.stringify(body);
  const spanId = await new Promise<string>((resolve, reject) => {
    const req = request(`${proxy.url}${path}`, {
      method: 'POST',
      agent: false,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload), 'x-tollgate-user': 'quitter' },
    });
    req.once('response', (res) => {
      expect(res.statusCode).toBe(200);
      res.once('data', () => {
        req.destroy();
        resolve(String(res.headers['x-proxy-span-id']));
      });
    });
    req.once('error', (error) => {
      if (!req.destroyed) reject(error);
    });
    req.end(payload);
  });
  await waitFor('the proxy to notice the caller left', () => proxy.logs.some((line) => line.span_id === spanId && String(line.msg).startsWith('caller left mid-answer')));
  return spanId;
}

function held(): { promise: Promise<void>; release: () => void } {
  let release!: () => void;
  const promise = new Promise<void>((resolve) => (release = resolve));
  return { promise, release };
}

describe('a caller who hangs up before the usage chunk', () => {
  it('on /proxy/beta is charged the usage OpenAI reports after it left', async () => {
    const tail = held();
    bed.openai.behave({ usage: { input: 1000, output: 200 }, holdTail: tail.promise, forRequests: 1 });
    const spanId = await callAndHangUp('/proxy/beta/v1/chat/completions', {
      model: 'gpt-4o-mini',
      stream: true,
      messages: [{ role: 'user', content: 'Tell me a story' }],
    });
    tail.release();
    const span = await findSpan(proxy.url, { spanId });
    // gpt-4o-mini: 1000 × 0.15 + 200 × 0.60 USD per million tokens
    expect(span).toMatchObject({ status: 'client_aborted', input_tokens: 1000, output_tokens: 200, usage_estimated: false, user_id: 'quitter' });
    expect(span.cost_usd).toBeCloseTo(0.00027, 12);
  });

  it('on /v1 translated from Anthropic is charged the output count of its message_delta', async () => {
    const tail = held();
    bed.anthropic.behave({ usage: { input: 500, output: 100 }, holdTail: tail.promise, forRequests: 1 });
    const spanId = await callAndHangUp('/v1/chat/completions', {
      model: 'claude-haiku-4-5',
      stream: true,
      messages: [{ role: 'user', content: 'Tell me a story' }],
    });
    tail.release();
    const span = await findSpan(proxy.url, { spanId });
    // claude-haiku-4-5: 500 × 1 + 100 × 5 USD per million tokens
    expect(span).toMatchObject({ status: 'client_aborted', input_tokens: 500, output_tokens: 100, usage_estimated: false });
    expect(span.cost_usd).toBeCloseTo(0.001, 12);
  });
});
