// Claude's token count on Bedrock (ADR 0912): the Messages request becomes CountTokens' input, the InvokeModel body
// base64-encoded, sent for the foundation model even when the caller named an inference profile.

import { describe, expect, it } from 'vitest';
import { ConfigStore } from '../config/config-store.ts';
import { ROUTE_MODULES } from './route-modules.ts';

const prices = new ConfigStore().current().prices;
const sonnet = prices.resolve('anthropic', 'claude-sonnet-4-5')!;

function countPlan(requested: string, request: Record<string, unknown>) {
  const plan = ROUTE_MODULES['gamma-cloudb'].v1!.messages!({ request, requested, entry: sonnet, upstream: undefined, env: {} }, 'count_tokens');
  const body = JSON.parse(plan!.body.toString('utf8')) as { input: { invokeModel: { body: string } } };
  return { plan: plan!, invokeBody: JSON.parse(Buffer.from(body.input.invokeModel.body, 'base64').toString('utf8')) as Record<string, unknown> };
}

describe("Claude's token count on Bedrock", () => {
  const messages = [{ role: 'user', content: 'How many?' }];

  it('counts for the foundation model: a geography prefix is dropped, and the answer is read from inputTokens', () => {
    const { plan, invokeBody } = countPlan('us.anthropic.claude-sonnet-4-5-20250929-v1:0', { model: 'us.anthropic.claude-sonnet-4-5-20250929-v1:0', messages, system: 'Terse.' });
    expect(plan.path).toBe('/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/count-tokens');
    expect(plan.model).toBe('anthropic.claude-sonnet-4-5-20250929-v1:0');
    expect(plan.tokenCountField).toBe('inputTokens');
    // The InvokeModel body: no model, Bedrock's version, and the max_tokens InvokeModel requires.
    expect(invokeBody).toEqual({ anthropic_version: 'bedrock-2023-05-31', max_tokens: 1, messages, system: 'Terse.' });
  });

  it("keeps max_tokens above a thinking budget, and the caller's own max_tokens and version", () => {
    const thinking = { type: 'enabled', budget_tokens: 2048 };
    expect(countPlan('claude-sonnet-4-5', { model: 'claude-sonnet-4-5', messages, thinking }).invokeBody).toMatchObject({ max_tokens: 2049, thinking });
    const own = countPlan('claude-sonnet-4-5', { model: 'claude-sonnet-4-5', messages, max_tokens: 300, anthropic_version: '2026-10-21' }).invokeBody;
    expect(own).toMatchObject({ max_tokens: 300, anthropic_version: '2026-10-21' });
    expect(own.stream).toBeUndefined();
  });
});
