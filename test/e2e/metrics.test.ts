// GET /metrics of a real `tollgate proxy` during known calls: the documented series with the values those
// calls must produce (expected numbers worked out by hand from the fakes' usage and the price table), on the
// proxy's port and on the health-only port, in both exposition formats, behind the Host check.

import { request } from 'node:http';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { familyTypes, sampleSum, sampleValue } from '../support/prometheus-text.ts';
import { findSpan } from '../support/spans.ts';
import { waitFor } from '../support/wait-for.ts';
import { freePort, startProxyProcess, type ProxyProcess } from './proxy-process.ts';
import { startUpstreamBed, type UpstreamBed } from './upstream-bed.ts';

let bed: UpstreamBed;
let proxy: ProxyProcess;
let healthPort: number;

beforeAll(async () => {
  bed = await startUpstreamBed();
  healthPort = await freePort();
  proxy = await startProxyProcess({
    configYaml: bed.configYaml(`
breaker: { consecutiveFailures: 2, openMs: 600000 }
metrics: { perUser: { enabled: true, maxUsers: 2 } }
budgets:
  policies:
    - { name: small, users: [erin], limitUsd: "0.0003", period: month, timeZone: UTC, alertThresholds: [50, 100], enforcement: block }
    - { name: large, users: [frank], limitUsd: "0.01", period: month, timeZone: UTC, alertThresholds: [50, 100], enforcement: block }
`),
    env: { ...bed.env, TOLLGATE_HEALTH_PORT: String(healthPort) },
  });
});

afterAll(async () => {
  await proxy?.stop();
  await bed?.close();
});

async function scrape(port: number, accept = 'text/plain'): Promise<{ status: number; contentType: string | null; body: string }> {
  const res = await fetch(`http://127.0.0.1:${port}/metrics`, { headers: { accept } });
  return { status: res.status, contentType: res.headers.get('content-type'), body: await res.text() };
}

async function post(path: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; spanId: string | null; text: string }> {
  const res = await fetch(`${proxy.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  return { status: res.status, spanId: res.headers.get('x-proxy-span-id'), text: await res.text() };
}

const chat = (model: string, extra: object = {}) => ({ model, messages: [{ role: 'user', content: 'hi' }], ...extra });

describe('GET /metrics during known calls', () => {
  beforeAll(async () => {
    // 1, 2. gpt-4o-mini, once whole and once streamed: prompt 1500 (500 cached), completion 200.
    bed.openai.behave({ usage: { input: 1000, cacheRead: 500, output: 200 } });
    const whole = await post('/proxy/beta/v1/chat/completions', chat('gpt-4o-mini'), { 'x-tollgate-user': 'alice' });
    expect(whole.status).toBe(200);
    const streamed = await post('/proxy/beta/v1/chat/completions', chat('gpt-4o-mini-2024-07-18', { stream: true }), { 'x-tollgate-user': 'bob' });
    expect(streamed.status).toBe(200);
    // 3. A model without a price entry.
    const unpriced = await post('/proxy/beta/v1/chat/completions', chat('my-fine-tune'), { 'x-tollgate-user': 'carol' });
    expect(unpriced.status).toBe(200);
    // 4. Claude through the Anthropic API: input 100, 5-minute writes 200, reads 300, output 50.
    bed.anthropic.behave({ usage: { input: 100, cacheWrite: 200, cacheRead: 300, output: 50 } });
    const claude = await post(
      '/proxy/gamma-direct/v1/messages',
      { model: 'claude-sonnet-4-20250514', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] },
      { 'anthropic-version': '2023-06-01', 'x-tollgate-user': 'dave' },
    );
    expect(claude.status).toBe(200);
    // 5, 6. Bedrock answers 500 twice: two upstream errors, and its breaker (consecutiveFailures: 2) opens.
    bed.bedrock.behave({ status: 500 });
    for (let i = 0; i < 2; i++) {
      const failed = await post('/proxy/gamma-cloudb/model/anthropic.claude-sonnet-4-20250514-v1:0/invoke', {
        anthropic_version: 'bedrock-2023-05-31',
        max_tokens: 10,
        messages: [{ role: 'user', content: 'hi' }],
      });
      expect(failed.status).toBe(500);
    }
    // 7. Refused by the open breaker: the proxy's own 502.
    const refused = await post('/proxy/gamma-cloudb/model/anthropic.claude-sonnet-4-20250514-v1:0/invoke', {
      anthropic_version: 'bedrock-2023-05-31',
      max_tokens: 10,
      messages: [],
    });
    expect(refused.status).toBe(502);
    // Every call's span is recorded (and so counted) once its response is done.
    await findSpan(proxy.url, { spanId: refused.spanId });
  });

  it('counts calls by route, provider, price-table model, status and the status class the caller got', async () => {
    const { body } = await scrape(proxy.port);
    const calls = (labels: Record<string, string>) => sampleValue(body, 'tollgate_requests_total', labels);
    expect(calls({ route: 'beta', provider: 'openai', model: 'gpt-4o-mini', status: 'ok', code: '2xx' })).toBe(2);
    expect(calls({ route: 'beta', provider: 'openai', model: 'other', status: 'ok', code: '2xx' })).toBe(1);
    expect(calls({ route: 'gamma-direct', provider: 'anthropic', model: 'claude-sonnet-4', status: 'ok', code: '2xx' })).toBe(1);
    expect(calls({ route: 'gamma-cloudb', provider: 'anthropic', model: 'claude-sonnet-4', status: 'upstream_error', code: '5xx' })).toBe(2);
    expect(calls({ route: 'gamma-cloudb', provider: 'anthropic', model: 'claude-sonnet-4', status: 'error', code: '5xx' })).toBe(1);
    expect(sampleSum(body, 'tollgate_requests_total')).toBe(7);
  });

  it('adds up tokens and cost as the price table prices them', async () => {
    const { body } = await scrape(proxy.port);
    const gpt = { route: 'beta', provider: 'openai', model: 'gpt-4o-mini' };
    expect(sampleValue(body, 'tollgate_tokens_total', { ...gpt, type: 'input' })).toBe(3000);
    expect(sampleValue(body, 'tollgate_tokens_total', { ...gpt, type: 'cache_read' })).toBe(1000);
    expect(sampleValue(body, 'tollgate_tokens_total', { ...gpt, type: 'output' })).toBe(400);
    // gpt-4o-mini, per call: 1000 × 0.15 + 500 × 0.075 + 200 × 0.60 = 150 + 37.5 + 120 = 307.5 µ$; two calls.
    expect(sampleValue(body, 'tollgate_cost_usd_total', gpt)).toBeCloseTo(0.000615, 12);
    const claude = { route: 'gamma-direct', provider: 'anthropic', model: 'claude-sonnet-4' };
    expect(sampleValue(body, 'tollgate_tokens_total', { ...claude, type: 'input' })).toBe(600);
    expect(sampleValue(body, 'tollgate_tokens_total', { ...claude, type: 'cache_write' })).toBe(200);
    // claude-sonnet-4: 100 × 3 + 200 × 3.75 + 300 × 0.30 + 50 × 15 = 300 + 750 + 90 + 750 = 1890 µ$.
    expect(sampleValue(body, 'tollgate_cost_usd_total', claude)).toBeCloseTo(0.00189, 12);
    // The unpriced model costs nothing, but its tokens are counted.
    expect(sampleValue(body, 'tollgate_cost_usd_total', { route: 'beta', model: 'other' })).toBe(0);
    expect(sampleValue(body, 'tollgate_tokens_total', { route: 'beta', model: 'other', type: 'input' })).toBe(1500);
  });

  it('observes latency: every call, and the upstream split for the calls that reached one', async () => {
    const { body } = await scrape(proxy.port);
    expect(sampleValue(body, 'tollgate_request_duration_seconds_count', { route: 'beta', provider: 'openai' })).toBe(3);
    expect(sampleValue(body, 'tollgate_upstream_duration_seconds_count', { route: 'beta', provider: 'openai' })).toBe(3);
    expect(sampleValue(body, 'tollgate_time_to_first_byte_seconds_count', { route: 'beta', provider: 'openai' })).toBe(3);
    expect(sampleValue(body, 'tollgate_overhead_seconds_count', { route: 'beta', provider: 'openai' })).toBe(3);
    // Three calls on gamma-cloudb, two reached Bedrock; the one the breaker refused has no upstream time.
    expect(sampleValue(body, 'tollgate_request_duration_seconds_count', { route: 'gamma-cloudb' })).toBe(3);
    expect(sampleValue(body, 'tollgate_upstream_duration_seconds_count', { route: 'gamma-cloudb' })).toBe(2);
    // The proxy's own share of a call is a part of the whole.
    const whole = sampleValue(body, 'tollgate_request_duration_seconds_sum', { route: 'beta' })!;
    const overhead = sampleValue(body, 'tollgate_overhead_seconds_sum', { route: 'beta' })!;
    expect(overhead).toBeGreaterThan(0);
    expect(overhead).toBeLessThan(whole);
  });

  it('shows the open breaker, spans written, per-user series with their cap, config and start-up', async () => {
    const body = await waitFor<string>('every span written', async () => {
      const { body: b } = await scrape(proxy.port);
      return sampleValue(b, 'tollgate_spans_written_total') === 7 ? b : undefined;
    });
    expect(sampleValue(body, 'tollgate_circuit_breaker_state', { route: 'gamma-cloudb', state: 'open' })).toBe(1);
    expect(sampleValue(body, 'tollgate_circuit_breaker_state', { route: 'gamma-cloudb', state: 'closed' })).toBe(0);
    expect(sampleValue(body, 'tollgate_circuit_breaker_state', { route: 'beta', state: 'closed' })).toBe(1);
    expect(sampleValue(body, 'tollgate_spans_dropped_total', { reason: 'buffer_full' })).toBe(0);
    expect(sampleValue(body, 'tollgate_span_store_failing')).toBe(0);
    expect(sampleValue(body, 'tollgate_span_store_info', { kind: 'sqlite' })).toBe(1);
    expect(sampleValue(body, 'tollgate_inflight_requests')).toBe(0);
    // maxUsers 2: alice and bob get their own series; carol and dave are counted as other.
    expect(sampleValue(body, 'tollgate_user_requests_total', { user: 'alice' })).toBe(1);
    expect(sampleValue(body, 'tollgate_user_requests_total', { user: 'bob' })).toBe(1);
    expect(sampleValue(body, 'tollgate_user_requests_total', { user: 'other' })).toBe(2);
    expect(sampleValue(body, 'tollgate_user_cost_usd_total', { user: 'alice' })).toBeCloseTo(0.0003075, 12);
    expect(sampleValue(body, 'tollgate_user_requests_total', { user: 'carol' })).toBeUndefined();
    expect(sampleValue(body, 'tollgate_config_revision')).toBe(0);
    expect(sampleValue(body, 'tollgate_config_last_apply_timestamp_seconds')).toBeGreaterThan(Date.now() / 1000 - 600);
    const startup = sampleValue(body, 'tollgate_startup_duration_seconds')!;
    expect(startup).toBeGreaterThan(0);
    expect(startup).toBeLessThan(60);
    expect(sampleValue(body, 'tollgate_otlp_spans_exported_total')).toBe(0);
  });

  it('follows a config change: the revision and apply time move, and a newly priced model gets its own label', async () => {
    const before = (await scrape(proxy.port)).body;
    const appliedBefore = sampleValue(before, 'tollgate_config_last_apply_timestamp_seconds')!;
    const change = await post('/_local/api/config', { pricing: { models: [{ provider: 'openai', model: 'my-fine-tune', input_per_million: 1, output_per_million: 2 }] } });
    expect(change.status).toBe(200);
    const after = (await scrape(proxy.port)).body;
    expect(sampleValue(after, 'tollgate_config_revision')).toBe(sampleValue(before, 'tollgate_config_revision')! + 1);
    expect(sampleValue(after, 'tollgate_config_last_apply_timestamp_seconds')).toBeGreaterThanOrEqual(appliedBefore);

    const priced = await post('/proxy/beta/v1/chat/completions', chat('my-fine-tune'));
    expect(priced.status).toBe(200);
    await findSpan(proxy.url, { spanId: priced.spanId });
    const body = (await scrape(proxy.port)).body;
    const tuned = { route: 'beta', provider: 'openai', model: 'my-fine-tune' };
    expect(sampleValue(body, 'tollgate_requests_total', { ...tuned, status: 'ok' })).toBe(1);
    expect(sampleValue(body, 'tollgate_requests_total', { route: 'beta', model: 'other', status: 'ok' })).toBe(1);
    // The fake's usage from above (prompt 1500 with 500 cached, completion 200) at the new entry's prices; with no
    // cached price, OpenAI's default multiplier (0.5): 1000 × 1 + 500 × 0.5 + 200 × 2 = 1650 µ$.
    expect(sampleValue(body, 'tollgate_cost_usd_total', tuned)).toBeCloseTo(0.00165, 12);
  });

  it('serves the same on the health-only port, as OpenMetrics when asked, and refuses a foreign Host', async () => {
    const health = await scrape(healthPort, 'application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3');
    expect(health.status).toBe(200);
    expect(health.contentType).toBe('application/openmetrics-text; version=1.0.0; charset=utf-8');
    expect(health.body.endsWith('# EOF\n')).toBe(true);
    expect(familyTypes(health.body).get('tollgate_requests')).toBe('counter');
    expect(sampleValue(health.body, 'tollgate_requests_total', { route: 'beta', model: 'gpt-4o-mini', status: 'ok' })).toBe(2);
    const text = await scrape(proxy.port);
    expect(text.contentType).toBe('text/plain; version=0.0.4; charset=utf-8');
    expect(familyTypes(text.body).get('tollgate_requests_total')).toBe('counter');
    for (const port of [proxy.port, healthPort]) {
      const status = await new Promise<number | undefined>((resolve, reject) => {
        request({ host: '127.0.0.1', port, path: '/metrics', headers: { host: `rebind-${randomUUID().slice(0, 8)}.attacker.example` } }, (res) => {
          res.resume();
          resolve(res.statusCode);
        })
          .on('error', reject)
          .end();
      });
      expect(status).toBe(403);
    }
  });
  it('shows users near their budget: the ratio of an exhausted one is at least 1, one far from its limit has no series', async () => {
    bed.openai.behave({ usage: { input: 1000, cacheRead: 500, output: 200 } });
    // gpt-4o-mini as above: 307.5 µ$ a call, over erin's 300 µ$ limit; 3 % of frank's 10000 µ$. Each is
    // admitted: while it runs it holds max_tokens 100 × 0.60 = 60 µ$ plus its input estimated from about 80
    // bytes of request (20 tokens × 0.15 = 3 µ$), under 300 (ADR 1308).
    for (const user of ['erin', 'frank']) {
      const call = await post('/proxy/beta/v1/chat/completions', chat('gpt-4o-mini', { max_tokens: 100 }), { 'x-tollgate-user': user });
      expect(call.status).toBe(200);
    }
    const body = (await scrape(proxy.port)).body;
    expect(sampleValue(body, 'tollgate_budget_utilization_ratio', { policy: 'small', user: 'erin' })).toBeCloseTo(1.025, 9);
    expect(sampleValue(body, 'tollgate_budget_utilization_ratio', { user: 'frank' })).toBeUndefined();
    // The next call of erin's is refused, and the series stays.
    const refused = await post('/proxy/beta/v1/chat/completions', chat('gpt-4o-mini'), { 'x-tollgate-user': 'erin' });
    expect(refused.status).toBe(429);
    expect(sampleValue((await scrape(healthPort)).body, 'tollgate_budget_utilization_ratio', { policy: 'small', user: 'erin' })).toBeGreaterThanOrEqual(1);
  });
});
