// What a caller of a rate-limited user reads (ADR 1309): OpenAI's reset durations and x-ratelimit-* headers.

import { ServerResponse, IncomingMessage } from 'node:http';
import { Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { formatResetDuration, keepOwnRateLimitHeaders, setRateLimitHeaders } from './rate-limit-answer.ts';

describe('formatResetDuration', () => {
  it('writes durations as OpenAI does (Go durations)', () => {
    expect(formatResetDuration(0)).toBe('0s');
    expect(formatResetDuration(12)).toBe('12ms');
    expect(formatResetDuration(0.4)).toBe('1ms');
    expect(formatResetDuration(6_000)).toBe('6s');
    expect(formatResetDuration(17_280)).toBe('17.28s');
    expect(formatResetDuration(60_000)).toBe('1m0s');
    expect(formatResetDuration(179_560)).toBe('2m59.56s');
    expect(formatResetDuration(360_000)).toBe('6m0s');
    expect(formatResetDuration(3_600_005)).toBe('1h0m0.005s');
  });
});

describe('setRateLimitHeaders', () => {
  it('sets the limit, remaining and reset of each window the policy limits, and nothing for the others', () => {
    const res = new ServerResponse(new IncomingMessage(new Socket()));
    setRateLimitHeaders(res, { refusedBy: null, retryAfterMs: 0, requests: { limit: 3, remaining: 2, resetMs: 20_000 }, tokens: null });
    expect(res.getHeaders()).toEqual({ 'x-ratelimit-limit-requests': '3', 'x-ratelimit-remaining-requests': '2', 'x-ratelimit-reset-requests': '20s' });
    const both = new ServerResponse(new IncomingMessage(new Socket()));
    setRateLimitHeaders(both, { refusedBy: 'tokens', retryAfterMs: 3_000, requests: null, tokens: { limit: 1000, remaining: 900, resetMs: 6_000 } });
    expect(both.getHeaders()).toEqual({ 'x-ratelimit-limit-tokens': '1000', 'x-ratelimit-remaining-tokens': '900', 'x-ratelimit-reset-tokens': '6s' });
  });
});

describe('keepOwnRateLimitHeaders', () => {
  it("drops the upstream's x-ratelimit-* when the user's own are on the answer, and keeps them otherwise", () => {
    // What OpenAI sends for an organisation (its limits, far above the user's).
    const upstream = () => ({
      'content-type': 'application/json',
      'x-ratelimit-limit-requests': '10000',
      'x-ratelimit-remaining-requests': '9999',
      'x-ratelimit-reset-requests': '6ms',
      'x-ratelimit-limit-tokens': '30000000',
      'x-ratelimit-remaining-tokens': '29999990',
      'x-ratelimit-reset-tokens': '0s',
    });
    const limited = new ServerResponse(new IncomingMessage(new Socket()));
    setRateLimitHeaders(limited, { refusedBy: null, retryAfterMs: 0, requests: { limit: 3, remaining: 2, resetMs: 20_000 }, tokens: null });
    const relayed = upstream();
    keepOwnRateLimitHeaders(limited, relayed);
    expect(relayed).toEqual({ 'content-type': 'application/json' });
    const unlimited = upstream();
    keepOwnRateLimitHeaders(new ServerResponse(new IncomingMessage(new Socket())), unlimited);
    expect(unlimited).toEqual(upstream());
  });
});
