import { Writable } from 'node:stream';
import pino from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { AuthFailureLog } from './auth-failure-log.ts';
import type { AuthFailure } from './authenticator.ts';

function capture() {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level: 'info' }, stream), lines };
}

const failure: AuthFailure = {
  reason: 'expired',
  message: 'the token expired',
  statusCode: 401,
  attempts: { oidc: 'expired: the token expired', accessTokens: 'not applicable: a JWT' },
};

afterEach(() => {
  vi.useRealTimers();
});

describe('all auth strategies failed', () => {
  it("logs each refusal with every strategy's reason, then only counts past 20 a minute and says how many it left out", async () => {
    vi.useFakeTimers({ now: 0 });
    const { logger, lines } = capture();
    const log = new AuthFailureLog(logger);
    for (let i = 0; i < 25; i++) log.record({ method: 'POST', path: '/v1/chat/completions', ip: '10.0.0.9', failure: i < 22 ? failure : { ...failure, reason: 'missing_token' } });
    expect(lines).toHaveLength(20);
    expect(lines[0]).toMatchObject({
      msg: 'all auth strategies failed',
      level: 40,
      reason: 'expired',
      status_code: 401,
      path: '/v1/chat/completions',
      ip: '10.0.0.9',
      strategies: failure.attempts,
      failures_this_minute: 1,
    });
    expect(lines[19]).toMatchObject({ failures_this_minute: 20, failures_total: 20 });

    await vi.advanceTimersByTimeAsync(60_000);
    expect(lines).toHaveLength(21);
    expect(lines[20]!.msg).toContain('all auth strategies failed (5 more in the last minute');
    expect(lines[20]).toMatchObject({ suppressed: 5, reasons: { expired: 2, missing_token: 3 }, failures_total: 25 });

    // A new minute logs again.
    log.record({ method: 'GET', path: '/healthz', ip: '10.0.0.9', failure });
    expect(lines).toHaveLength(22);
    expect(lines[21]).toMatchObject({ failures_this_minute: 1, failures_total: 26 });
    log.close();
    expect(lines).toHaveLength(22);
  });
});
