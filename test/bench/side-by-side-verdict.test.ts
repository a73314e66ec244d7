// The benchmark smoke fails on bench/side-by-side.ts's throughput verdict: Tollgate's share of the bare Node
// relay's calls measured in the same seconds, against the share bench/recorded.json keeps. It must fail on a
// gross loss (below half the recorded share) and never on the spread of a shared machine above that.

import { describe, expect, it } from 'vitest';
import { recordedShareOfNodeRelay, regressions, type SideBySideReport } from '../../bench/side-by-side.ts';

const memory = { rssMb: 120, privateMb: 60, fileMb: 60, peakRssMb: 120 };

/** A report whose memory is well within bounds; only the share of the Node relay varies. */
function reportWithShare(nodeRelay: number): SideBySideReport {
  return {
    sixteenConnections: { tollgateShare: { nginx: nodeRelay / 3, nodeRelay } },
    memory: {
      idle: memory,
      loadedMinutes: [memory],
      growthMb: 0,
      burst: { streams: 200, aborted: 67, completed: 133, failed: 0, peak: memory, after: memory },
      bigStream: { mb: 50, before: memory, peak: { ...memory, privateMb: 67 } },
      chartLimitMb: 256,
    },
  } as unknown as SideBySideReport;
}

describe("the side-by-side verdict on Tollgate's share of the bare Node relay", () => {
  it('passes a share anywhere from half the recorded one up, and fails one below half, naming both', () => {
    expect(regressions(reportWithShare(0.36), 0.35)).toEqual([]);
    expect(regressions(reportWithShare(0.18), 0.35)).toEqual([]);
    const [verdict, ...rest] = regressions(reportWithShare(0.17), 0.35);
    expect(rest).toEqual([]);
    expect(verdict).toMatch(/^throughput: Tollgate served 17 % of the bare Node relay's calls, below half the recorded 35 %/);
    expect(regressions(reportWithShare(Number.NaN), 0.35)).toHaveLength(1);
  });

  it('reads a recorded share that is a share', () => {
    const share = recordedShareOfNodeRelay();
    expect(share).toBeGreaterThan(0);
    expect(share).toBeLessThanOrEqual(2);
  });
});
