// The audit fan-out end to end: a real `tollgate proxy` process (as a sidecar of pod team-a/web-1) reads a
// fake Tetragon agent over real gRPC and fans out to a jsonl file and a real gRPC collector. Asserts what a
// security team would check: only the pod's own events, byte-identical at the collector; a dead collector
// costs the jsonl sink nothing and ends in the dead-letter file; agent restarts and GOAWAY are survived and
// logged; a burst with a stalled sink is counted exactly; SIGTERM drains. A collector that is down fails fast,
// its events go to the dead-letter file as they come, none dropped, and delivery resumes when it is back; a
// stalled collector holds no more than queue.maxBytes.

import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setInterval as every } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SinkStatus } from '../../sidecar/src/audit/sink-worker.ts';
import { TetragonEvent } from '../../sidecar/src/audit/tetragon-protocol.ts';
import { type FakeAuditCollector, startFakeAuditCollector } from '../fakes/audit-collector.ts';
import { type FakeTetragonAgent, mixedEvents, startFakeTetragonAgent } from '../fakes/tetragon-agent.ts';
import { type ProxyProcess, startProxyProcess } from './proxy-process.ts';
import { waitFor } from '../support/wait-for.ts';

const SELF = { namespace: 'team-a', pod: 'web-1' };
const OTHERS = [
  { namespace: 'team-a', pod: 'web-10' },
  { namespace: 'team-b', pod: 'web-1' },
];
const POD_ENV = { TOLLGATE_POD_NAME: SELF.pod, TOLLGATE_POD_NAMESPACE: SELF.namespace };

type Log = Record<string, unknown>;

function logsWith(proxy: ProxyProcess, msg: string, match: (l: Log) => boolean = () => true): Log[] {
  return proxy.logs.filter((l) => typeof l.msg === 'string' && l.msg.includes(msg) && match(l));
}

function lines(path: string): string[] {
  return existsSync(path) ? readFileSync(path, 'utf8').split('\n').filter(Boolean) : [];
}

type SinkHealth = SinkStatus;

async function auditHealth(proxy: ProxyProcess): Promise<{ source: { eventsReceived: number; connected: boolean; connects: number; disconnects: number }; sinks: SinkHealth[] }> {
  const res = await fetch(`${proxy.url}/_local/api/health`);
  expect(res.status).toBe(200);
  return ((await res.json()) as { audit: never }).audit;
}

function sink(health: { sinks: SinkHealth[] }, name: string): SinkHealth {
  return health.sinks.find((s) => s.name === name)!;
}

function configYaml(opts: { agent: string; collector: string; dir: string; extra?: string; grpcExtra?: string }): string {
  return `
audit:
  source: { address: "${opts.agent}" }
  sinks:
    - name: siem
      kind: jsonl
      path: ${join(opts.dir, 'audit.jsonl')}
    - name: collector
      kind: grpc
      address: ${opts.collector}
      batchSize: 50
${opts.grpcExtra ?? '      timeoutMs: 400\n'}
  retry: { maxAttempts: 3, initialBackoffMs: 20, maxBackoffMs: 100 }
  deadLetter: { path: ${join(opts.dir, 'dead-letter.jsonl')} }
${opts.extra ?? ''}
storage: { kind: memory }
`;
}

// Longer than any one wait below (30 s), so a wait that runs out names what it waited for.
describe('audit fan-out in a sidecar process', { timeout: 60_000 }, () => {
  let agent: FakeTetragonAgent;
  let collector: FakeAuditCollector;
  let proxy: ProxyProcess;
  let dir: string;
  const sentOwn: Buffer[] = [];

  beforeAll(async () => {
    agent = await startFakeTetragonAgent();
    collector = await startFakeAuditCollector();
    // The proxy's own temp dir is created by startProxyProcess; paths are resolved relative to its cwd.
    proxy = await startProxyProcess({ configYaml: configYaml({ agent: agent.address, collector: collector.address, dir: '.' }), env: POD_ENV });
    dir = proxy.dir;
  });

  afterAll(async () => {
    if (process.env.AUDIT_TEST_LOGS) console.log(proxy.logs.map((l) => JSON.stringify(l)).join('\n'));
    await proxy?.stop('SIGKILL');
    await agent?.stop();
    await collector?.stop();
  });

  it('asks the agent for its own pod only, and delivers exactly those events: jsonl as protojson, the collector byte for byte', async () => {
    await agent.waitForSubscribers(1);
    expect(agent.requests[0]).toEqual({ allow_list: [{ namespace: ['team-a'], pod_regex: ['^web-1$'] }] });
    await waitFor('the connected log line', () => logsWith(proxy, 'tetragon audit stream connected').length > 0);

    const events = mixedEvents([SELF, ...OTHERS], 45, { unknownField: true });
    agent.emit(events);
    const own = events.filter((e) => new TetragonEvent(e).info.podName === SELF.pod && new TetragonEvent(e).info.podNamespace === SELF.namespace);
    expect(own).toHaveLength(15);
    sentOwn.push(...own);

    await collector.waitForEvents(own.length);
    const received = collector.events();
    expect(received).toHaveLength(own.length);
    received.forEach((e, i) => {
      // Every byte, the field this project's proto does not declare included.
      expect(e.tetragon_event.equals(own[i]!)).toBe(true);
      expect(e.pod_namespace).toBe('team-a');
      expect(e.pod_name).toBe('web-1');
    });
    expect(new Set(received.map((e) => e.event_type))).toEqual(new Set(['process_exec', 'process_kprobe', 'process_tracepoint', 'process_exit']));
    expect(collector.batches[0]!.sender).toBe('team-a/web-1');
    expect(collector.batches[0]!.sink).toBe('collector');

    const jsonl = await waitFor('15 jsonl lines', () => {
      const l = lines(join(dir, 'audit.jsonl'));
      return l.length >= own.length && l;
    });
    expect(jsonl).toHaveLength(own.length);
    jsonl.forEach((line, i) => {
      const parsed = JSON.parse(line) as Record<string, { process: { pod: { namespace: string; name: string }; pid: number; start_time: string } }> & { node_name: string };
      const body = Object.values(parsed).find((v) => typeof v === 'object' && v !== null && 'process' in v)!;
      expect(body.process.pod).toMatchObject({ namespace: 'team-a', name: 'web-1' });
      // protojson: wrappers as bare numbers, timestamps as RFC 3339, snake_case keys
      expect(typeof body.process.pid).toBe('number');
      expect(body.process.start_time).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/);
      expect(parsed.node_name).toBe('node-a');
      expect(line).toBe(new TetragonEvent(own[i]!).json());
    });

    // The collector stores a batch before its answer reaches the sidecar: wait for the sidecar to count it.
    const health = await waitFor('the deliveries to be counted', async () => {
      const h = await auditHealth(proxy);
      return h.sinks.every((s) => s.delivered === 15) && h;
    });
    expect(health.source).toMatchObject({ connected: true, eventsReceived: 15 });
    expect(sink(health, 'siem')).toMatchObject({ received: 15, delivered: 15, dropped: 0, deadLettered: 0, queueDepth: 0 });
    expect(sink(health, 'collector')).toMatchObject({ received: 15, delivered: 15, dropped: 0, deadLettered: 0, queueDepth: 0 });
  });

  it('a dead collector leaves the jsonl sink unaffected, logs audit sink write failed, retries, dead-letters after the limit, and resumes when back', async () => {
    await collector.stop();
    const batch = mixedEvents([SELF], 6);
    agent.emit(batch);
    await waitFor('jsonl to carry the new events', () => lines(join(dir, 'audit.jsonl')).length === 21);

    const dead = await waitFor('six dead-lettered events', () => {
      const l = lines(join(dir, 'dead-letter.jsonl'));
      return l.length >= 6 && l;
    });
    expect(dead).toHaveLength(6);
    const entries = dead.map((line) => JSON.parse(line) as { sink: string; reason: string; attempts: number; tetragon_event_base64: string });
    // The first batch is tried three times; once it has failed them all the collector is down, and the
    // events the worker happened to batch after it go to the file at once (or after one probe).
    expect(entries[0]).toMatchObject({ attempts: 3, reason: expect.stringMatching(/^gave up after 3 attempts: .*UNAVAILABLE/) as unknown });
    entries.forEach((entry, i) => {
      expect(entry.sink).toBe('collector');
      if (entry.attempts === 3) expect(entry.reason).toMatch(/^gave up after 3 attempts: .*UNAVAILABLE/);
      else expect(entry.reason).toMatch(/^sink down.*UNAVAILABLE/);
      expect(Buffer.from(entry.tetragon_event_base64, 'base64').equals(batch[i]!)).toBe(true);
    });
    const failed = logsWith(proxy, 'audit sink write failed', (l) => l.sink === 'collector');
    expect(failed.length).toBeGreaterThan(0);
    // refused at once, not held until the call's deadline
    expect(String(failed[0]!.err)).toMatch(/UNAVAILABLE/);
    // rate-limited: several failed attempts, one line (the rest are counted into the next one)
    expect(failed.length).toBe(1);
    expect(logsWith(proxy, 'audit sink write failed', (l) => l.sink === 'siem')).toHaveLength(0);

    const health = await waitFor('the dead letters to be counted', async () => {
      const h = await auditHealth(proxy);
      return sink(h, 'collector').deadLettered === 6 && h;
    });
    expect(sink(health, 'collector')).toMatchObject({ received: 21, delivered: 15, deadLettered: 6, dropped: 0, down: true });
    // the events of the first batch were sent three times
    expect(sink(health, 'collector').retried).toBe(2 * entries.filter((e) => e.attempts === 3).length);
    expect(logsWith(proxy, 'audit sink down', (l) => l.sink === 'collector')).toHaveLength(1);
    expect(sink(health, 'siem')).toMatchObject({ received: 21, delivered: 21, deadLettered: 0 });

    await collector.start();
    // A batch that reaches a down sink before its next probe is due goes to the dead-letter file by design;
    // emitting only once the probe is due makes the next batch the probe.
    const { nextProbeAt } = sink(await auditHealth(proxy), 'collector');
    await waitFor('the next probe to be due', () => Date.now() > Date.parse(nextProbeAt!));
    const after = mixedEvents([SELF], 3);
    agent.emit(after);
    await collector.waitForEvents(15 + 3);
    expect(
      collector
        .events()
        .slice(-3)
        .map((e) => e.tetragon_event.toString('base64')),
    ).toEqual(after.map((e) => e.toString('base64')));
    await waitFor('the collector to count as up', async () => !sink(await auditHealth(proxy), 'collector').down);
    expect(logsWith(proxy, 'audit sink delivering again', (l) => l.sink === 'collector')).toHaveLength(1);
  });

  it('survives an agent restart and a GOAWAY too_many_pings: logs disconnected with the reason, reconnecting, connected, and resumes', async () => {
    const connectedBefore = logsWith(proxy, 'tetragon audit stream connected').length;
    await agent.restart(300);
    await waitFor('disconnected', () => logsWith(proxy, 'tetragon audit stream disconnected').length > 0);
    const disconnected = logsWith(proxy, 'tetragon audit stream disconnected')[0]!;
    expect(String(disconnected.reason)).toMatch(/UNAVAILABLE|CANCELLED|INTERNAL/);
    await waitFor('reconnecting', () => logsWith(proxy, 'tetragon audit stream reconnecting').length > 0);
    await agent.waitForSubscribers(1);
    await waitFor('connected again', () => logsWith(proxy, 'tetragon audit stream connected').length > connectedBefore);

    const resumed = mixedEvents([SELF], 4);
    agent.emit(resumed);
    await collector.waitForEvents(18 + 4);

    const disconnectsBefore = logsWith(proxy, 'tetragon audit stream disconnected').length;
    agent.goAway();
    await waitFor('a second disconnect', () => logsWith(proxy, 'tetragon audit stream disconnected').length > disconnectsBefore);
    await agent.waitForSubscribers(1);
    const again = mixedEvents([SELF], 2);
    agent.emit(again);
    await collector.waitForEvents(22 + 2);

    // a connection cut mid-stream (no GOAWAY, no trailers)
    const beforeDrop = logsWith(proxy, 'tetragon audit stream disconnected').length;
    agent.dropConnections();
    await waitFor('a third disconnect', () => logsWith(proxy, 'tetragon audit stream disconnected').length > beforeDrop);
    await agent.waitForSubscribers(1);
    const afterDrop = mixedEvents([SELF], 2);
    agent.emit(afterDrop);
    await collector.waitForEvents(24 + 2);

    const health = await auditHealth(proxy);
    expect(health.source.disconnects).toBeGreaterThanOrEqual(3);
    expect(health.source.connected).toBe(true);
  });

  it('SIGTERM stops reading and drains what a slow collector still holds within the deadline', async () => {
    collector.stall();
    const pending = mixedEvents([SELF], 10);
    const callsBefore = collector.calls;
    agent.emit(pending);
    await waitFor('the stalled call to arrive', () => collector.calls > callsBefore);
    proxy.child.kill('SIGTERM');
    await waitFor('the drain to start', () => logsWith(proxy, 'shutting down').length > 0);
    collector.resume();
    const code = await new Promise<number | null>((resolve) => proxy.child.once('exit', resolve));
    expect(code).toBe(0);
    const drained = logsWith(proxy, 'audit sink drained', (l) => l.sink === 'collector')[0]!;
    expect(drained).toMatchObject({ received: 42, delivered: 36, deadLettered: 6, dropped: 0 });
    expect(
      collector
        .events()
        .slice(-10)
        .map((e) => e.tetragon_event.toString('base64')),
    ).toEqual(pending.map((e) => e.toString('base64')));
    expect(logsWith(proxy, 'audit fan-out stopped')).toHaveLength(1);
  });
});

describe('a burst of 10,000 events with one sink stalled', () => {
  it('is counted exactly per sink: delivered + dropped + dead-lettered = received, and the drain dead-letters what is left', async () => {
    const agent = await startFakeTetragonAgent();
    const stalled = await startFakeAuditCollector();
    stalled.stall();
    const proxy = await startProxyProcess({
      configYaml: configYaml({
        agent: agent.address,
        collector: stalled.address,
        dir: '.',
        grpcExtra: '      timeoutMs: 300\n',
        extra: '  queue: { maxEvents: 2000, whenFull: drop_newest }\n  drainTimeoutMs: 1000\n',
      }),
      env: POD_ENV,
    });
    try {
      await agent.waitForSubscribers(1);
      const burst = mixedEvents([SELF], 10_000);
      agent.emit(burst);
      await waitFor('all 10,000 events read', async () => (await auditHealth(proxy)).source.eventsReceived === 10_000, 60_000);

      const during = await auditHealth(proxy);
      for (const s of during.sinks) {
        expect(s.received).toBe(10_000);
        expect(s.delivered + s.dropped + s.deadLettered + s.queueDepth + s.inFlight).toBe(10_000);
      }
      expect(sink(during, 'collector').dropped).toBeGreaterThan(0);

      const deadLetterPath = join(proxy.dir, 'dead-letter.jsonl');
      const jsonlPath = join(proxy.dir, 'audit.jsonl');
      proxy.child.kill('SIGTERM');
      const code = await new Promise<number | null>((resolve) => proxy.child.once('exit', resolve));
      expect(code).toBe(0);
      const totals = Object.fromEntries(logsWith(proxy, 'audit sink drained').map((l) => [l.sink as string, l as unknown as SinkHealth]));
      for (const name of ['siem', 'collector']) {
        const t = totals[name]!;
        expect(t.received).toBe(10_000);
        expect(t.delivered + t.dropped + t.deadLettered).toBe(10_000);
      }
      expect(totals.collector!.delivered).toBe(0);
      expect(lines(deadLetterPath)).toHaveLength(totals.collector!.deadLettered + totals.siem!.deadLettered);
      expect(lines(jsonlPath)).toHaveLength(totals.siem!.delivered);
      expect(logsWith(proxy, 'audit events dropped', (l) => l.sink === 'collector').length).toBeGreaterThan(0);
    } finally {
      await proxy.stop('SIGKILL');
      await agent.stop();
      await stalled.stop();
    }
  }, 120_000);
});

describe('a gRPC collector that is down', () => {
  it('fails fast on the refused connection, dead-letters events at the rate they come with none dropped, and delivers again once it is back', async () => {
    const agent = await startFakeTetragonAgent();
    const collector = await startFakeAuditCollector();
    await collector.stop(); // its port now refuses connections
    const proxy = await startProxyProcess({
      configYaml: configYaml({
        agent: agent.address,
        collector: collector.address,
        dir: '.',
        // The default per-call timeout: a refused connection must not wait it out.
        grpcExtra: '      timeoutMs: 10000\n',
        // A queue that holds two seconds of this stream.
        extra: '  queue: { maxEvents: 2000 }\n',
      }),
      env: POD_ENV,
    });
    try {
      await agent.waitForSubscribers(1);
      // 4,000 events at about 1,000 a second: twice what the queue holds.
      const sent: Buffer[] = [];
      for await (const _ of every(50)) {
        const events = mixedEvents([SELF], 50);
        agent.emit(events);
        sent.push(...events);
        if (sent.length >= 4_000) break;
      }
      const health = await waitFor(
        'every event dead-lettered',
        async () => {
          const h = await auditHealth(proxy);
          const c = sink(h, 'collector');
          return c.deadLettered + c.dropped === 4_000 && h;
        },
        30_000,
      );
      expect(sink(health, 'collector')).toMatchObject({ received: 4_000, delivered: 0, dropped: 0, deadLettered: 4_000, queueDepth: 0, down: true });
      expect(sink(health, 'siem')).toMatchObject({ received: 4_000, delivered: 4_000, dropped: 0 });
      const dead = lines(join(proxy.dir, 'dead-letter.jsonl')).map((l) => JSON.parse(l) as { sink: string; tetragon_event_base64: string });
      expect(dead).toHaveLength(4_000);
      expect(dead.every((d) => d.sink === 'collector')).toBe(true);
      expect(dead.map((d) => d.tetragon_event_base64)).toEqual(sent.map((e) => e.toString('base64')));
      // refused at once (UNAVAILABLE), not held until the 10 s deadline (DEADLINE_EXCEEDED)
      const failed = logsWith(proxy, 'audit sink write failed', (l) => l.sink === 'collector');
      expect(failed.length).toBeGreaterThan(0);
      for (const f of failed) expect(String(f.err)).toMatch(/UNAVAILABLE/);
      expect(logsWith(proxy, 'audit sink down', (l) => l.sink === 'collector')).toHaveLength(1);
      expect(logsWith(proxy, 'audit events dropped')).toHaveLength(0);

      await collector.start();
      const after = mixedEvents([SELF], 20);
      await waitFor('delivery to resume', async () => {
        if (collector.events().length === 0) agent.emit(after.splice(0, 1));
        return collector.events().length > 0;
      });
      agent.emit(after);
      const back = await waitFor('the sink to be up and every event counted', async () => {
        const c = sink(await auditHealth(proxy), 'collector');
        return !c.down && c.received === 4_020 && c.queueDepth === 0 && c.inFlight === 0 && c;
      });
      expect(back.dropped).toBe(0);
      expect(back.delivered + back.deadLettered).toBe(4_020);
      expect(back.delivered).toBeGreaterThan(0);
      expect(logsWith(proxy, 'audit sink delivering again', (l) => l.sink === 'collector')).toHaveLength(1);
    } finally {
      await proxy.stop('SIGKILL');
      await agent.stop();
      await collector.stop();
    }
  }, 60_000);
});

describe('queue.maxBytes', () => {
  it('holds no more than maxBytes of events for a stalled collector, queued and in flight; the rest are dropped and counted', async () => {
    const agent = await startFakeTetragonAgent();
    const stalled = await startFakeAuditCollector();
    stalled.stall();
    const maxBytes = 1024 * 1024;
    const proxy = await startProxyProcess({
      configYaml: configYaml({
        agent: agent.address,
        collector: stalled.address,
        dir: '.',
        grpcExtra: '      timeoutMs: 60000\n',
        extra: `  queue: { maxEvents: 10000, maxBytes: ${maxBytes} }\n`,
      }),
      env: POD_ENV,
    });
    try {
      await agent.waitForSubscribers(1);
      // 100 events of about 64 KiB: 6.4 MiB, far under the event bound and six times the byte bound
      const events = mixedEvents([SELF], 100, { extraBytes: 64 * 1024 });
      agent.emit(events);
      const health = await waitFor('all 100 events counted', async () => {
        const h = await auditHealth(proxy);
        return h.sinks.every((s) => s.received === 100) && h;
      });
      const c = sink(health, 'collector');
      expect(c.queueBytes + c.inFlightBytes).toBeLessThanOrEqual(maxBytes);
      expect(c.queueBytes + c.inFlightBytes).toBeGreaterThan(maxBytes - 2 * events[0]!.length);
      expect(c.dropped).toBe(100 - c.queueDepth - c.inFlight);
      expect(c.dropped).toBeGreaterThan(80);
      const dropped = logsWith(proxy, 'audit events dropped', (l) => l.sink === 'collector');
      expect(String(dropped[0]!.reason)).toBe(`queue full (10000 events or ${maxBytes} bytes, drop_newest)`);
      for (const s of health.sinks) expect(s.delivered + s.dropped + s.deadLettered + s.queueDepth + s.inFlight).toBe(100);
    } finally {
      await proxy.stop('SIGKILL');
      await agent.stop();
      await stalled.stop();
    }
  }, 60_000);
});
