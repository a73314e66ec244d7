// A short run of the side-by-side benchmark (bench/side-by-side.ts --quick, about half a minute): the sidecar as
// the image runs it next to a bare nginx relay. It fails only on gross regressions, never on a slow machine:
// Tollgate's throughput falling behind the relay's by more than three times the ratio recorded in
// bench/recorded.json (both measured in the same minute, so a busy machine slows both), memory above the chart's
// sidecar limit, or a 50 MB streamed answer held whole. The numbers themselves go to BENCHMARKS.md, not here.

import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { ensureBenchTools } from '../../bench/bare-relay.ts';
import { runSideBySide, type SideBySideReport } from '../../bench/side-by-side.ts';

const ROOT = new URL('../..', import.meta.url).pathname;
const recorded = JSON.parse(readFileSync(new URL('../../bench/recorded.json', import.meta.url), 'utf8')) as { relayToTollgateThroughput: number };

let missing: string | null = null;
let report: SideBySideReport | undefined;

beforeAll(async () => {
  missing = await ensureBenchTools((line) => console.info(`[bench smoke] ${line}`));
  if (missing !== null) return;
  // The image runs dist/, so the smoke does too.
  execFileSync('npm', ['run', '--silent', 'build'], { cwd: ROOT, stdio: 'inherit' });
  report = await runSideBySide({ quick: true, seconds: 2, minutes: 1, log: (line) => console.info(`[bench smoke] ${line}`) });
  console.info(`[bench smoke] ${JSON.stringify({ sixteen: report.sixteenConnections.relayToTollgateThroughput, memory: report.memory.loadedMinutes, load: report.loadAverage })}`);
}, 300_000);

describe('benchmark smoke: the sidecar beside a bare relay', () => {
  it('can run here', () => {
    if (missing !== null && process.env.CI === 'true') throw new Error(`the benchmark smoke cannot run: ${missing}`);
  });

  it('keeps its throughput within three times the recorded ratio to the bare relay', (ctx) => {
    if (report === undefined) return ctx.skip(missing ?? 'no report');
    expect(report.sixteenConnections.relayToTollgateThroughput).toBeLessThan(3 * recorded.relayToTollgateThroughput);
  });

  it("stays under the chart's sidecar memory limit through load, a burst of streams with callers leaving, and a 50 MB stream", (ctx) => {
    if (report === undefined) return ctx.skip(missing ?? 'no report');
    const { memory } = report;
    const peak = Math.max(...memory.loadedMinutes.map((m) => m.rssMb), memory.burst.peak.rssMb, memory.bigStream.peak.rssMb);
    expect(peak).toBeLessThan(memory.chartLimitMb);
    expect(memory.burst.failed).toBe(0);
  });

  it('passes a 50 MB streamed answer through without holding it', (ctx) => {
    if (report === undefined) return ctx.skip(missing ?? 'no report');
    const { before, peak } = report.memory.bigStream;
    expect(peak.privateMb - before.privateMb).toBeLessThan(report.memory.bigStream.mb);
  });
});
