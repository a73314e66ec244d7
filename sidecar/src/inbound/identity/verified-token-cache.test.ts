import { describe, expect, it } from 'vitest';
import { tokenKey, VerifiedTokenCache } from './verified-token-cache.ts';

describe('VerifiedTokenCache', () => {
  it('keeps an answer until its deadline, nothing past it, and keys by hash rather than the token', () => {
    let now = 1_000;
    const cache = new VerifiedTokenCache(() => now);
    const verified = { claims: { email: 'a@example.com' }, issuer: 'https://issuer.example' };
    expect(tokenKey('secret-token')).not.toContain('secret');
    cache.set(tokenKey('t1'), verified, 5_000);
    cache.set(tokenKey('t2'), verified, 500); // already past: not kept
    expect(cache.get(tokenKey('t1'))).toBe(verified);
    expect(cache.get(tokenKey('t2'))).toBeUndefined();
    now = 5_000;
    expect(cache.get(tokenKey('t1'))).toBeUndefined();
  });

  it('holds at most 10,000 answers, dropping the oldest', () => {
    const cache = new VerifiedTokenCache(() => 0);
    const verified = { claims: {}, issuer: 'i' };
    for (let i = 0; i <= 10_000; i++) cache.set(`k${i}`, verified, 1);
    expect(cache.get('k0')).toBeUndefined();
    expect(cache.get('k1')).toBe(verified);
    expect(cache.get('k10000')).toBe(verified);
  });
});
