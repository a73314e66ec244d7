import { describe, expect, it } from 'vitest';
import { ConfigStore, defaultRuntimeConfig } from '../config/config-store.ts';
import type { PriceEntry } from '../../../contracts/price-entry.ts';
import { bedrockVendor, isConverseModel } from './bedrock-model-ids.ts';
import { planGatewayCall } from './v1-plan.ts';

describe('Bedrock model ids', () => {
  it.each([
    ['amazon.nova-pro-v1:0', 'amazon'],
    ['us.amazon.nova-pro-v1:0', 'amazon'],
    ['meta.llama3-3-70b-instruct-v1:0', 'meta'],
    ['eu.meta.llama3-2-3b-instruct-v1:0', 'meta'],
    ['mistral.mistral-large-2407-v1:0', 'mistral'],
    ['us.anthropic.claude-sonnet-4-20250514-v1:0', 'anthropic'],
    ['global.anthropic.claude-sonnet-4-5-20250929-v1:0', 'anthropic'],
    ['arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.amazon.nova-lite-v1:0', 'amazon'],
  ])('%s is a Bedrock id of vendor %s', (id, vendor) => {
    expect(bedrockVendor(id)).toBe(vendor);
  });

  it.each(['claude-sonnet-4-5', 'claude-sonnet-4.5', 'claude-opus-4.1', 'claude-sonnet-4@20250514', 'gpt-4.1', 'nova-pro'])('%s is not a Bedrock id', (id) => {
    expect(bedrockVendor(id)).toBeUndefined();
  });

  it('a Converse model is one whose entry holds another vendor’s Bedrock id; Claude’s entries are not', () => {
    const prices = new ConfigStore().current().prices;
    expect(isConverseModel(prices.resolve('anthropic', 'nova-pro')!)).toBe(true);
    expect(isConverseModel(prices.resolve('anthropic', 'claude-sonnet-4')!)).toBe(false);
    expect(isConverseModel(prices.resolve('anthropic', 'claude-opus-4-6')!)).toBe(false);
  });

  it('a Llama model priced by an override is reached through Converse on gamma-cloudb', () => {
    const llama: PriceEntry = { provider: 'anthropic', model: 'meta.llama3-3-70b-instruct-v1:0', input_per_million: 0.72, output_per_million: 0.72 };
    const request = { model: 'us.meta.llama3-3-70b-instruct-v1:0', messages: [{ role: 'user', content: 'Hi' }], stream: true };
    const plan = planGatewayCall(request, { entry: llama, provider: 'anthropic', requested: request.model }, defaultRuntimeConfig(), {});
    expect(plan).toMatchObject({ route: 'gamma-cloudb', model: 'us.meta.llama3-3-70b-instruct-v1:0', path: '/model/us.meta.llama3-3-70b-instruct-v1%3A0/converse-stream' });
  });
});
