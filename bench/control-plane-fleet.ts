// A load-generator process of bench/control-plane-scale.ts: simulated sidecars (test/cluster/sidecar-fleet.ts),
// driven by its parent over the IPC channel. Every request is `{ id, op, ...args }`; every answer `{ id, result }`
// or `{ id, error }`. Started with `serialization: 'advanced'`, so ledger amounts travel as bigints.

import { type FleetOptions, type FleetPod, SidecarFleet, type SpendLoad } from '../test/cluster/sidecar-fleet.ts';

export type FleetRequest =
  | { op: 'add'; pods: FleetPod[] }
  | { op: 'summary' }
  | { op: 'acks'; version: string }
  | { op: 'delivered' }
  | { op: 'startSpend'; load: SpendLoad; periodStart: string }
  | { op: 'stopSpend' }
  | { op: 'probe'; index: number; charge: { policy: string; user: string; periodStart: string; units: bigint } }
  | { op: 'expectProbe'; user: string; units: bigint }
  | { op: 'probeSeen'; user: string }
  | { op: 'stop' };

export interface FleetSummary {
  sidecars: number;
  connected: number;
  streams: number;
  failures: Record<string, number>;
  budgetMessages: number;
  usageEntries: number;
  reportsSent: number;
  charged: bigint;
  acknowledged: bigint;
  rssMb: number;
}

function summary(fleet: SidecarFleet): FleetSummary {
  const failures: Record<string, number> = {};
  let connected = 0;
  let streams = 0;
  let budgetMessages = 0;
  let usageEntries = 0;
  let reportsSent = 0;
  let charged = 0n;
  let acknowledged = 0n;
  for (const s of fleet.sidecars) {
    if (s.connected) connected++;
    streams += s.streams;
    budgetMessages += s.budgetMessages;
    usageEntries += s.usageEntries;
    reportsSent += s.reportsSent;
    charged += s.charged;
    acknowledged += s.acknowledged;
    for (const [name, n] of s.failures) failures[name] = (failures[name] ?? 0) + n;
  }
  return {
    sidecars: fleet.sidecars.length,
    connected,
    streams,
    failures,
    budgetMessages,
    usageEntries,
    reportsSent,
    charged,
    acknowledged,
    rssMb: process.memoryUsage.rss() / 2 ** 20,
  };
}

function handle(fleet: SidecarFleet, request: FleetRequest): unknown {
  switch (request.op) {
    case 'add':
      return fleet.add(request.pods);
    case 'summary':
      return summary(fleet);
    case 'acks':
      // When each sidecar acknowledged the version (undefined: not yet).
      return fleet.sidecars.map((s) => s.acked.get(request.version));
    case 'delivered':
      // When each sidecar's current stream delivered its first snapshot (0: not connected).
      return fleet.sidecars.map((s) => s.deliveredAt);
    case 'startSpend':
      return fleet.startSpend(request.load, request.periodStart);
    case 'stopSpend':
      return fleet.stopSpend();
    case 'probe':
      return fleet.probe(request.index, request.charge);
    case 'expectProbe':
      return fleet.expectProbe(request.user, request.units);
    case 'probeSeen':
      return { sentAt: fleet.probes.sentAt.get(request.user), seen: fleet.sidecars.map((s) => s.probeSeen.get(request.user)) };
    case 'stop':
      fleet.stop();
      setImmediate(() => process.exit(0));
      return undefined;
  }
}

const options = JSON.parse(process.argv[2] ?? '{}') as FleetOptions;
const fleet = new SidecarFleet(options);
process.on('message', (message: { id: number } & FleetRequest) => {
  try {
    process.send!({ id: message.id, result: handle(fleet, message) });
  } catch (error) {
    process.send!({ id: message.id, error: (error as Error).message });
  }
});
// The parent going away ends the fleet: nothing here outlives a benchmark run.
process.on('disconnect', () => process.exit(0));
