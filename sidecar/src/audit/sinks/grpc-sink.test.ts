// The gRPC sink over real gRPC against the fake collector: after a long outage, the first batch written once
// the collector listens again is delivered. A sink that stays on the channel's reconnect backoff would fail that
// probe, and the worker would send the batch to the dead-letter file although the collector is back.

import { afterEach, describe, expect, it } from 'vitest';
import { type FakeAuditCollector, startFakeAuditCollector } from '../../../../test/fakes/audit-collector.ts';
import { mixedEvents } from '../../../../test/fakes/tetragon-agent.ts';
import { waitFor } from '../../../../test/support/wait-for.ts';
import { TetragonEvent } from '../tetragon-protocol.ts';
import { GrpcSink } from './grpc-sink.ts';

let collector: FakeAuditCollector | undefined;
let sink: GrpcSink | undefined;
afterEach(async () => {
  await sink?.close();
  await collector?.stop();
});

function records(count: number) {
  return mixedEvents([{ namespace: 'team-a', pod: 'web-1' }], count).map((raw, i) => ({ sequence: i + 1, receivedAt: Date.now(), event: new TetragonEvent(raw) }));
}

describe('GrpcSink', () => {
  it('delivers the first batch written after a collector that was down for seconds listens again', async () => {
    collector = await startFakeAuditCollector();
    sink = new GrpcSink({ name: 'collector', address: collector.address, timeoutMs: 2_000, maxBatch: 50, sender: 'team-a/web-1' });
    await sink.write(records(1), new AbortController().signal);
    await collector.stop();

    // Failed writes for three seconds: long enough for a shared channel to back off past a second.
    const until = Date.now() + 3_000;
    let failures = 0;
    await waitFor(
      'three seconds of writes refused',
      async () => {
        await expect(sink!.write(records(1), new AbortController().signal)).rejects.toThrow(/UNAVAILABLE/);
        failures++;
        return Date.now() >= until;
      },
      { timeoutMs: 10_000, intervalMs: 50 },
    );
    expect(failures).toBeGreaterThan(10);

    await collector.start();
    await sink.write(records(2), new AbortController().signal);
    expect(collector.events()).toHaveLength(3);
  });
});
