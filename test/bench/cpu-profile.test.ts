// bench/cpu-profile.ts is what BENCHMARKS.md's "where the time goes" rests on: a sample's time must go to the
// owner of the function that was running, and idle time to no one.

import { describe, expect, it } from 'vitest';
import { selfTimeByOwner } from '../../bench/cpu-profile.ts';

const frame = (id: number, functionName: string, url: string) => ({ id, callFrame: { functionName, url } });

describe('a CPU profile summed by owner', () => {
  it('counts each sample under its function and leaves idle out', () => {
    const profile = {
      nodes: [
        frame(1, '(idle)', ''),
        frame(2, 'handleProxyCall', 'file:///app/sidecar/src/http/proxy.js'),
        frame(3, 'request', 'file:///repo/node_modules/undici/lib/api/api-request.js'),
        frame(4, 'writev', ''),
        frame(5, '(garbage collector)', ''),
        frame(6, 'emit', 'node:events'),
        frame(7, 'parse', 'file:///repo/node_modules/@fastify/ajv-compiler/index.js'),
      ],
      // Each sample owns the time until the next one (timeDeltas[i + 1]); the last sample has no end.
      samples: [1, 2, 3, 4, 5, 6, 7, 2],
      timeDeltas: [0, 1000, 10, 20, 30, 40, 50, 60],
    };
    const { owners, totalUs } = selfTimeByOwner(profile);
    expect(Object.fromEntries(owners)).toEqual({
      "Tollgate's own modules": 10,
      undici: 20,
      'native: writev': 30,
      'garbage collection': 40,
      "Node's internals (node:*)": 50,
      '@fastify/ajv-compiler': 60,
    });
    expect(totalUs).toBe(210);
  });

  it('refuses a sample that names no node', () => {
    expect(() => selfTimeByOwner({ nodes: [frame(1, 'f', 'node:fs')], samples: [9, 1], timeDeltas: [0, 5] })).toThrow(/node 9/);
  });
});
