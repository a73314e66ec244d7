import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../../test/fakes/llm-upstream.ts';
import { ConfigStore } from './config-store.ts';
import { UpstreamClient } from '../upstream/upstream-client.ts';
import { createCredentialProviders } from '../auth/credential-provider.ts';
import { followCredentialSettings } from './live-credentials.ts';
import { CallAbort } from '../upstream/call-abort.ts';
import { readAnswerWhole } from '../upstream/answer-body.ts';

const logger = pino({ level: 'silent' });
let upstream: FakeUpstream | undefined;
let client: UpstreamClient | undefined;

afterEach(async () => {
  await client?.close();
  await upstream?.close();
});

async function chat(store: ConfigStore): Promise<number> {
  try {
    const res = await client!.send(store.get(), {
      route: 'beta',
      method: 'POST',
      path: '/v1/chat/completions',
      headers: { 'content-type': 'application/json' },
      body: Buffer.from(JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })),
      signal: new CallAbort(),
    });
    await readAnswerWhole(res.body, Number.MAX_SAFE_INTEGER);
    res.settle('success');
    return res.statusCode;
  } catch {
    return 0; // refused before the upstream (no credential)
  }
}

it('a key file set later (an operator push) is used by the next call, without a restart', async () => {
  upstream = await startFakeUpstream('openai', { expectApiKey: 'sk-pushed' });
  const store = new ConfigStore({ upstreams: { beta: { baseUrl: upstream.url } } });
  const credentials = createCredentialProviders({ credentials: {}, upstreams: () => store.get().upstreams, logger, env: {} });
  client = new UpstreamClient({ credentials, breaker: store.get().breaker, logger });
  const stop = followCredentialSettings({ store, client, logger, env: {} });
  const googleBefore = credentials['google-adc'];

  expect(await chat(store)).toBe(0);
  expect(upstream.requests).toHaveLength(0);

  const dir = mkdtempSync(join(tmpdir(), 'live-creds-'));
  writeFileSync(join(dir, 'openai-api-key'), 'sk-pushed\n');
  store.setLayer('operator', { credentials: { openaiApiKeyFile: join(dir, 'openai-api-key') } });
  expect(await chat(store)).toBe(200);
  expect(upstream.requests.at(-1)!.headers.authorization).toBe('Bearer sk-pushed');
  // providers whose settings did not change were kept (their token caches survive)
  expect(credentials['google-adc']).toBe(googleBefore);
  stop();
});
