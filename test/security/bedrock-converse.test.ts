// Bedrock's Converse API on gamma-cloudb was forwarded and never metered: its camelCase usage was read with
// Anthropic's field names (a zero usage that was not null, so the token-count headers were never consulted),
// and the stream decoder dropped every event that was not an InvokeModel `chunk`, the `metadata` event with the
// usage included. 20 Converse calls worth ~2.4 USD were answered against a 0.50 USD budget, every ConverseStream
// was recorded as `stream ended before message_stop`, and five of them opened the route's breaker for everyone.
// Here the AWS SDK's own Converse and ConverseStream commands run through the proxy against a fake Bedrock
// that answers in the documented shapes.

import { BedrockRuntimeClient, ConverseCommand, ConverseStreamCommand } from '@aws-sdk/client-bedrock-runtime';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startProxyProcess, type ProxyProcess } from '../e2e/proxy-process.ts';
import { AWS, startUpstreamBed, type UpstreamBed } from '../e2e/upstream-bed.ts';
import { findSpan } from '../support/spans.ts';

const SONNET = 'us.anthropic.claude-sonnet-4-5-20250929-v1:0';
const messages = [{ role: 'user' as const, content: [{ text: 'Say hello.' }] }];
const inferenceConfig = { maxTokens: 100 };

let bed: UpstreamBed;
let proxy: ProxyProcess;
let client: BedrockRuntimeClient;

beforeAll(async () => {
  bed = await startUpstreamBed();
  // A 0.02 USD monthly budget: at Sonnet 4.5's 3 / 15 USD per million, each call below costs 0.006 USD. While
  // it runs, each holds its estimated cost against the budget (ADR 1308): its maxTokens, 100 × 15 / 10⁶ =
  // 0.0015, plus its input estimated from the request's few dozen bytes, about 0.0001.
  proxy = await startProxyProcess({
    configYaml: bed.configYaml(`
budgets:
  policies:
    - { name: default, users: ["*"], limitUsd: 0.02, period: month, timeZone: UTC, enforcement: block }
breaker: { consecutiveFailures: 3, failureRatio: 0.5, minimumRequests: 3, windowMs: 60000, openMs: 60000 }
`),
    env: bed.env,
  });
  client = new BedrockRuntimeClient({
    region: AWS.region,
    endpoint: `${proxy.url}/proxy/gamma-cloudb`,
    credentials: { accessKeyId: 'AKIDCALLER', secretAccessKey: 'caller-secret' },
    maxAttempts: 1,
  });
  // The budget is per user id: the caller names itself, as docs/budgets.md shows.
  client.middlewareStack.add(
    (next) => async (args) => {
      (args.request as { headers: Record<string, string> }).headers['x-tollgate-user'] = 'alice';
      return next(args);
    },
    { step: 'build', name: 'tollgateUser' },
  );
});

afterAll(async () => {
  client?.destroy();
  await proxy?.stop();
  await bed?.close();
});

beforeEach(() => {
  bed.reset();
  bed.bedrock.behave({ usage: { input: 1000, output: 200 } });
});

/** The span id the proxy put on the answer the SDK got. */
function spanIdOf(output: { $metadata: { httpStatusCode?: number } }, headers: Record<string, string>): string {
  expect(output.$metadata.httpStatusCode).toBe(200);
  return headers['x-proxy-span-id']!;
}

describe('Converse and ConverseStream are metered, priced and budgeted', () => {
  const seenHeaders: Record<string, string>[] = [];
  beforeAll(() => {
    client.middlewareStack.add(
      (next) => async (args) => {
        const result = await next(args);
        seenHeaders.push((result.response as { headers: Record<string, string> }).headers);
        return result;
      },
      { step: 'deserialize', name: 'keepResponseHeaders' },
    );
  });

  it('a Converse call is charged its usage: 1000 × 3 + 200 × 15 USD per million = 0.006 USD', async () => {
    const output = await client.send(new ConverseCommand({ modelId: SONNET, messages, inferenceConfig }));
    expect(output.usage).toMatchObject({ inputTokens: 1000, outputTokens: 200 });
    const span = await findSpan(proxy.url, { spanId: spanIdOf(output, seenHeaders.at(-1)!) });
    expect(span).toMatchObject({ route: 'gamma-cloudb', status: 'ok', input_tokens: 1000, output_tokens: 200, priced: true });
    expect(span.cost_usd).toBeCloseTo(0.006, 12);
    expect(bed.bedrock.requests.at(-1)!.path).toBe(`/model/${encodeURIComponent(SONNET)}/converse`);
  });

  it('a ConverseStream call ends ok, its metadata usage charged, and never counts against the breaker', async () => {
    for (let i = 0; i < 2; i++) {
      const output = await client.send(new ConverseStreamCommand({ modelId: SONNET, messages, inferenceConfig }));
      const members: string[] = [];
      let usage: unknown;
      for await (const event of output.stream!) {
        members.push(Object.keys(event).find((key) => (event as unknown as Record<string, unknown>)[key] !== undefined)!);
        if (event.metadata) usage = event.metadata.usage;
      }
      expect(members).toEqual(['messageStart', 'contentBlockDelta', 'contentBlockStop', 'messageStop', 'metadata']);
      expect(usage).toMatchObject({ inputTokens: 1000, outputTokens: 200 });
      const span = await findSpan(proxy.url, { spanId: spanIdOf(output, seenHeaders.at(-1)!) });
      expect(span).toMatchObject({ status: 'ok', input_tokens: 1000, output_tokens: 200, error: null });
      expect(span.cost_usd).toBeCloseTo(0.006, 12);
    }
  });

  it('once the 0.02 USD budget is spent, the next Converse call is refused before Bedrock sees it', async () => {
    // 0.018 USD spent by the three calls above; this one is admitted (0.018 + its 0.0016 held ≤ 0.02) and
    // takes it to 0.024.
    await client.send(new ConverseCommand({ modelId: SONNET, messages, inferenceConfig }));
    const before = bed.bedrock.requests.length;
    const refused = await client.send(new ConverseCommand({ modelId: SONNET, messages, inferenceConfig })).then(
      () => undefined,
      (error: { name: string; $metadata?: { httpStatusCode?: number }; message: string }) => error,
    );
    expect(refused?.$metadata?.httpStatusCode).toBe(429);
    expect(refused?.name).toBe('ThrottlingException');
    expect(refused?.message).toMatch(/^budget_exceeded: user "alice" has spent the 0\.02 USD monthly budget/);
    expect(bed.bedrock.requests.length).toBe(before);
  });
});
