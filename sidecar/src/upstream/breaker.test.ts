import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { BreakerConfig } from '../../../contracts/runtime-config.ts';
import { CircuitBreaker } from './breaker.ts';

interface LogLine {
  level: number;
  msg: string;
  [key: string]: unknown;
}

const config: BreakerConfig = {
  consecutiveFailures: 3,
  failureRatio: 0.5,
  minimumRequests: 10,
  windowMs: 10_000,
  openMs: 5_000,
};

function setup(cfg: BreakerConfig = config) {
  const lines: LogLine[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n')) if (line) lines.push(JSON.parse(line) as LogLine);
      done();
    },
  });
  const clock = { now: 1_000_000 };
  const breaker = new CircuitBreaker('beta', cfg, pino({ level: 'info' }, stream), () => clock.now);
  const tripped = () => lines.filter((l) => l.msg === 'circuit breaker tripped');
  return { breaker, lines, clock, tripped };
}

/** One call through the breaker, as the upstream client makes it. */
function call(breaker: CircuitBreaker, ok: boolean): boolean {
  if (!breaker.tryAcquire()) return false;
  if (ok) breaker.onSuccess();
  else breaker.onFailure();
  return true;
}

describe('CircuitBreaker', () => {
  it('opens after consecutiveFailures failures in a row and logs the trip with the upstream name', () => {
    const { breaker, tripped } = setup();
    call(breaker, false);
    call(breaker, false);
    call(breaker, true); // a success resets the run
    call(breaker, false);
    call(breaker, false);
    expect(breaker.state()).toBe('closed');
    call(breaker, false);
    expect(breaker.state()).toBe('open');
    expect(breaker.tryAcquire()).toBe(false);
    expect(tripped()).toHaveLength(1);
    expect(tripped()[0]).toMatchObject({ level: 40, upstream: 'beta', reason: '3 consecutive failures', failures: 3 });
  });

  it('opens when the failure ratio over the window reaches the threshold once minimumRequests were seen', () => {
    const { breaker, clock, tripped } = setup({ ...config, consecutiveFailures: 100 });
    // Alternate: never two failures in a row, ratio 0.5 at every even count.
    for (let i = 0; i < 8; i++) {
      call(breaker, i % 2 === 0);
      clock.now += 100;
    }
    call(breaker, true);
    expect(breaker.state()).toBe('closed'); // 9 requests: below minimumRequests
    call(breaker, false); // 10 requests, 5 failures
    expect(breaker.state()).toBe('open');
    expect(tripped()[0]).toMatchObject({ upstream: 'beta', failures: 5 });
    expect(tripped()[0]?.reason).toMatch(/^failure ratio 0\.50 over 10 requests/);
  });

  it('forgets failures older than the window', () => {
    const { breaker, clock } = setup({ ...config, consecutiveFailures: 100, minimumRequests: 4 });
    call(breaker, false);
    call(breaker, false);
    call(breaker, false);
    clock.now += 20_000; // all three are now outside the 10 s window
    call(breaker, true);
    call(breaker, true);
    call(breaker, true);
    call(breaker, false); // 1 of 4 in the window
    expect(breaker.state()).toBe('closed');
  });

  it('after openMs lets exactly one probe through; the others are still refused', () => {
    const { breaker, clock } = setup();
    for (let i = 0; i < 3; i++) call(breaker, false);
    clock.now += 4_999;
    expect(breaker.tryAcquire()).toBe(false);
    clock.now += 1;
    expect(breaker.state()).toBe('half-open');
    expect(breaker.tryAcquire()).toBe(true);
    expect(breaker.tryAcquire()).toBe(false);
    expect(breaker.tryAcquire()).toBe(false);
    expect(breaker.state()).toBe('half-open');
  });

  it('closes when the probe succeeds, logging the recovery, and starts counting afresh', () => {
    const { breaker, clock, lines } = setup();
    for (let i = 0; i < 3; i++) call(breaker, false);
    clock.now += 5_000;
    expect(call(breaker, true)).toBe(true);
    expect(breaker.state()).toBe('closed');
    expect(lines.find((l) => l.msg === 'circuit breaker recovered; closed')).toMatchObject({ level: 30, upstream: 'beta' });
    // The failures before the trip do not count any more: it takes a full new run to open again.
    call(breaker, false);
    call(breaker, false);
    expect(breaker.state()).toBe('closed');
    expect(breaker.tryAcquire()).toBe(true);
  });

  it('re-opens when the probe fails, logging the trip again, and waits another openMs', () => {
    const { breaker, clock, tripped } = setup();
    for (let i = 0; i < 3; i++) call(breaker, false);
    clock.now += 5_000;
    expect(call(breaker, false)).toBe(true);
    expect(breaker.state()).toBe('open');
    expect(tripped()).toHaveLength(2);
    expect(tripped()[1]).toMatchObject({ upstream: 'beta', reason: 'half-open probe failed', failures: 1 });
    clock.now += 4_999;
    expect(breaker.tryAcquire()).toBe(false);
    clock.now += 1;
    expect(breaker.tryAcquire()).toBe(true);
  });

  it('release() frees the half-open slot when the probe ends without a verdict', () => {
    const { breaker, clock } = setup();
    for (let i = 0; i < 3; i++) call(breaker, false);
    clock.now += 5_000;
    expect(breaker.tryAcquire()).toBe(true);
    expect(breaker.tryAcquire()).toBe(false);
    breaker.release();
    expect(breaker.tryAcquire()).toBe(true);
    expect(breaker.tryAcquire()).toBe(false);
  });

  it('applies a live config change without resetting its state', () => {
    const { breaker, clock } = setup();
    call(breaker, false);
    call(breaker, false);
    breaker.updateConfig({ ...config, consecutiveFailures: 2, openMs: 1_000 });
    call(breaker, false);
    expect(breaker.state()).toBe('open');
    clock.now += 1_000;
    expect(breaker.tryAcquire()).toBe(true);
  });

  it('rejects an unusable config, naming the field, and keeps the old one', () => {
    const { breaker } = setup();
    expect(() => breaker.updateConfig({ ...config, failureRatio: 0 })).toThrow('invalid breaker config: failureRatio must be in (0, 1], got 0');
    call(breaker, false);
    call(breaker, false);
    expect(breaker.state()).toBe('closed');
    call(breaker, false);
    expect(breaker.state()).toBe('open');
  });
});
