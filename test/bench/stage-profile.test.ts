// bench/stage-profile.ts is what BENCHMARKS.md's per-stage table rests on: a sample goes to the stage of the
// innermost frame that names one (so a socket write under the relay is response writing and under undici the
// upstream request), idle to no stage, and only samples inside the measured window count.

import { describe, expect, it } from 'vitest';
import { timeByStage } from '../../bench/stage-profile.ts';

const frame = (id: number, functionName: string, url: string, children: number[] = []) => ({ id, callFrame: { functionName, url }, children });
const APP = 'file:///tmp/app/sidecar/src';
const MODULES = 'file:///work/node_modules';

const profile = {
  nodes: [
    frame(1, '(root)', '', [2, 3, 6, 8, 10, 12, 13, 14]),
    frame(2, '(idle)', ''),
    frame(3, '#complete', `${APP}/pipeline/relay.js`, [4]),
    frame(4, 'write', 'node:_http_outgoing', [5]),
    frame(5, 'writev', ''),
    frame(6, 'request', `${MODULES}/undici/lib/api/api-request.js`, [7]),
    frame(7, 'writev', ''),
    frame(8, 'LOG', `${MODULES}/pino/lib/tools.js`, [9]),
    frame(9, 'writeString', ''),
    frame(10, 'callBody', `${APP}/http/proxy.js`, [11]),
    frame(11, 'headerValue', 'file:///tmp/app/contracts/header-value.js'),
    frame(12, '(garbage collector)', ''),
    frame(13, 'parserOnIncoming', 'node:_http_server'),
    frame(14, 'finish', `${APP}/metering/call-meter.js`),
  ],
  // Each sample owns the time until the next one (timeDeltas[i + 1]); the last has no end.
  samples: [2, 5, 7, 9, 11, 12, 13, 14, 2],
  timeDeltas: [0, 100, 10, 20, 30, 40, 50, 60, 70],
  startTime: 1_000,
  endTime: 2_000,
};

describe('a CPU profile summed by stage', () => {
  it("gives each sample to its innermost named frame's stage and leaves idle out", () => {
    const { stages, totalUs } = timeByStage(profile);
    expect(Object.fromEntries(stages)).toEqual({
      'response writing': 10,
      'upstream request': 20,
      'log line': 30,
      'request body': 40,
      'garbage collection': 50,
      'Node HTTP server and sockets': 60,
      'span write': 70,
    });
    expect(totalUs).toBe(280);
  });

  it('counts only the samples taken inside the window', () => {
    // Sample times: 1000, 1100, 1110, 1130, 1160, 1200, 1250, 1310, 1380.
    const { stages } = timeByStage(profile, { fromUs: 1_105, toUs: 1_170 });
    expect(Object.fromEntries(stages)).toEqual({ 'upstream request': 20, 'log line': 30, 'request body': 40 });
  });
});
