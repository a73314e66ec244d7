// A short run of the side-by-side benchmark (bench/side-by-side.ts --quick, about half a minute): the sidecar as
// the image runs it next to a bare nginx relay and a bare Node relay. It catches a benchmark that can no longer
// run (a build, a flag, a changed report), a burst whose calls fail, and a gross loss of throughput: Tollgate's
// share of the bare Node relay's calls, measured in the same seconds on the same runtime (so a slow or busy
// machine slows both), below half the share bench/recorded.json keeps. No absolute speed or latency is
// asserted (CONTRIBUTING); the numbers go to BENCHMARKS.md.

import { execFileSync } from 'node:child_process';
import { beforeAll, describe, expect, it } from 'vitest';
import { ensureBenchTools } from '../../bench/bare-relay.ts';
import { recordedShareOfNodeRelay, regressions, runSideBySide, type SideBySideReport } from '../../bench/side-by-side.ts';

const ROOT = new URL('../..', import.meta.url).pathname;

let missing: string | null = null;
let report: SideBySideReport | undefined;

beforeAll(async () => {
  missing = await ensureBenchTools((line) => console.info(`[bench smoke] ${line}`));
  if (missing !== null) return;
  // The image runs dist/, so the smoke does too.
  execFileSync('npm', ['run', '--silent', 'build'], { cwd: ROOT, stdio: 'inherit' });
  report = await runSideBySide({ quick: true, seconds: 2, minutes: 1, log: (line) => console.info(`[bench smoke] ${line}`) });
  console.info(
    `[bench smoke] ${JSON.stringify({ shareOf: report.sixteenConnections.tollgateShare, recorded: recordedShareOfNodeRelay(), memory: report.memory.loadedMinutes, load: report.loadAverage })}`,
  );
}, 300_000);

describe('benchmark smoke: the sidecar beside a bare relay', () => {
  it('can run here', () => {
    if (missing !== null && process.env.CI === 'true') throw new Error(`the benchmark smoke cannot run: ${missing}`);
  });

  it('measures every path and reports on the run', (ctx) => {
    if (report === undefined) return ctx.skip(missing ?? 'no report');
    const measured = [
      report.oneConnection.tollgate.p50Ms,
      report.sixteenConnections.tollgate.requestsPerSecond,
      report.sixteenConnections.tollgateShare.nodeRelay,
      report.sixteenConnections.nodeRelay.requestsPerSecond,
      report.streamingTtfbMs.tollgate.p50,
      report.memory.burst.peak.rssMb,
      report.memory.bigStream.peak.privateMb,
    ];
    expect(measured.every((n) => Number.isFinite(n) && n > 0)).toBe(true);
    expect(report.memory.loadedMinutes.length).toBeGreaterThan(0);
    expect(report.spansRecorded).toBeGreaterThan(0);
    // The verdict is the benchmark's: a list of sentences, logged here for whoever reads the run.
    console.info(`[bench smoke] regressions: ${JSON.stringify(regressions(report, recordedShareOfNodeRelay()))}`);
  });

  it('keeps at least half the recorded share of the bare Node relay', (ctx) => {
    if (report === undefined) return ctx.skip(missing ?? 'no report');
    // Only the throughput verdict: a ratio of two paths measured in the same seconds, with a factor of two of room.
    const throughput = regressions(report, recordedShareOfNodeRelay()).filter((line) => line.startsWith('throughput'));
    expect(throughput).toEqual([]);
  });

  it('answers every call of a burst of streams, callers leaving included', (ctx) => {
    if (report === undefined) return ctx.skip(missing ?? 'no report');
    expect(report.memory.burst.failed).toBe(0);
  });
});
