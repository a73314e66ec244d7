// An upstream that quotes the request it refused, credential included, must not show the caller the proxy's
// own key: the error's headers and body are scrubbed of every credential value the proxy attached, on the
// native routes and on /v1 alike.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProxyProcess, type ProxyProcess } from '../e2e/proxy-process.ts';
import { ANTHROPIC_KEY, AWS, OPENAI_KEY, startUpstreamBed, type UpstreamBed } from '../e2e/upstream-bed.ts';

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

const REDACTED = '[redacted by tollgate]';
const chat = (model: string) => JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] });

async function call(path: string, body: string): Promise<{ status: number; text: string; headers: string }> {
  const response = await fetch(`${proxy.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' }, body });
  return { status: response.status, text: await response.text(), headers: JSON.stringify([...response.headers]) };
}

describe("an upstream error that echoes the proxy's credential", () => {
  it('OpenAI (Bearer key) on /proxy/beta and on /v1: neither body nor headers carry the key', async () => {
    const echo = { error: { message: `Incorrect API key provided: Bearer ${OPENAI_KEY}`, type: 'invalid_request_error', param: null, code: 'invalid_api_key' } };
    bed.openai.behave({ status: 401, errorBody: echo, errorHeaders: { 'x-debug-authorization': `Bearer ${OPENAI_KEY}` }, forRequests: 2 });
    const native = await call('/proxy/beta/v1/chat/completions', chat('gpt-4o-mini'));
    expect(native.status).toBe(401);
    expect(native.text).toContain(REDACTED);
    for (const seen of [native.text, native.headers]) expect(seen).not.toContain(OPENAI_KEY);
    const gateway = await call('/v1/chat/completions', chat('gpt-4o-mini'));
    expect(gateway.status).toBe(401);
    expect(gateway.text).toContain(REDACTED);
    for (const seen of [gateway.text, gateway.headers]) expect(seen).not.toContain(OPENAI_KEY);
  });

  it('Anthropic (x-api-key) and Bedrock (the SigV4 access key id)', async () => {
    bed.anthropic.behave({ status: 400, errorBody: { type: 'error', error: { type: 'invalid_request_error', message: `bad request with key ${ANTHROPIC_KEY}` } }, forRequests: 1 });
    const anthropic = await call('/proxy/gamma-direct/v1/messages', JSON.stringify({ model: 'claude-haiku-4-5', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }));
    expect(anthropic.status).toBe(400);
    expect(anthropic.text).not.toContain(ANTHROPIC_KEY);
    expect(anthropic.text).toContain(REDACTED);

    bed.bedrock.behave({ status: 403, errorBody: { message: `The security token included in the request is invalid: ${AWS.accessKeyId}` }, forRequests: 1 });
    const bedrock = await call(
      '/proxy/gamma-cloudb/model/anthropic.claude-haiku-4-5-20251001-v1:0/invoke',
      JSON.stringify({ anthropic_version: 'bedrock-2023-05-31', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }),
    );
    expect(bedrock.status).toBe(403);
    expect(bedrock.text).not.toContain(AWS.accessKeyId);
    expect(bedrock.text).toContain(REDACTED);
  });

  it('an error that quotes nothing secret passes through unchanged', async () => {
    bed.openai.behave({ status: 429, forRequests: 1 });
    const limited = await call('/proxy/beta/v1/chat/completions', chat('gpt-4o-mini'));
    expect(limited.status).toBe(429);
    expect(JSON.parse(limited.text)).toMatchObject({ error: { message: 'Fake upstream error 429.', code: 'rate_limit_exceeded' } });
  });
});
