// The Tetragon source over real gRPC against the fake agent: a stream of messages that do not decode is
// counted exactly but logged at most once per interval, each line saying how many it stands for.

import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { type FakeTetragonAgent, mixedEvents, startFakeTetragonAgent } from '../../../test/fakes/tetragon-agent.ts';
import { waitFor } from '../../../test/support/wait-for.ts';
import { TetragonSource } from './tetragon-source.ts';

const UNDECODABLE = 'tetragon audit stream sent an event that does not decode; dropped';

let agent: FakeTetragonAgent | undefined;
let source: TetragonSource | undefined;
afterEach(async () => {
  await source?.stop();
  await agent?.stop();
});

describe('TetragonSource', () => {
  it('rate-limits the warning about events that do not decode, and names the suppressed ones in the next line', async () => {
    const logs: Record<string, unknown>[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => logs.push(JSON.parse(line) as Record<string, unknown>) });
    agent = await startFakeTetragonAgent();
    let decoded = 0;
    // The source reads the interval at each message: the test ends it instead of waiting it out.
    const limit = { intervalMs: 60_000 };
    source = new TetragonSource({
      address: agent.address,
      request: {},
      onEvent: () => decoded++,
      logger,
      get undecodableLogIntervalMs() {
        return limit.intervalMs;
      },
    });
    source.start();
    await agent.waitForSubscribers(1);

    // field 1 (process_exec) declared as a length-delimited field longer than the message: does not decode
    const broken = Buffer.from([0x0a, 0x7f, 0x01, 0x02]);
    agent.emitRaw(Array.from({ length: 4_999 }, () => broken));
    agent.emit(mixedEvents([{ namespace: 'team-a', pod: 'web-1' }], 1));
    await waitFor('every message read', () => source!.status().eventsReceived === 5_000);
    expect(source.status().undecodable).toBe(4_999);
    expect(decoded).toBe(1);
    const first = logs.filter((l) => l.msg === UNDECODABLE);
    expect(first).toHaveLength(1);
    expect(first[0]).toMatchObject({ undecodable: 1, suppressed: 0, bytes: 4 });

    // the interval has passed: the next one is logged, with the count of those left out since the last line
    limit.intervalMs = 0;
    agent.emitRaw([broken]);
    await waitFor('the next line', () => logs.filter((l) => l.msg === UNDECODABLE).length === 2);
    expect(logs.filter((l) => l.msg === UNDECODABLE)[1]).toMatchObject({ undecodable: 5_000, suppressed: 4_998 });
  });
});
