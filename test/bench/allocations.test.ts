// bench/allocations.ts is what BENCHMARKS.md's bytes-per-call table rests on: every byte of a sampling heap
// profile is counted once, a function's bytes go to its own stage or its innermost named caller's, bytes with
// no JavaScript on the stack are V8's own, and a builtin called from two stages is two sites.

import { describe, expect, it } from 'vitest';
import { allocationsBySite } from '../../bench/allocations.ts';

const APP = 'file:///tmp/app/sidecar/src';
const MODULES = 'file:///work/node_modules';
type Node = Parameters<typeof allocationsBySite>[0];
const node = (functionName: string, url: string, selfSize: number, children: Node[] = [], lineNumber = 0): Node => ({
  callFrame: { functionName, url, lineNumber },
  selfSize,
  children,
});

const head = node('(root)', '', 0, [
  node('(V8 API)', '', 100),
  node('parserOnIncoming', 'node:_http_server', 200, [
    node('Map', '', 70),
    node(
      'handleProxyCall',
      `${APP}/http/proxy.js`,
      300,
      [node('Map', '', 50), node('LOG', `${MODULES}/pino/lib/tools.js`, 400, [node('write', 'node:internal/fs/utils', 25)], 46)],
      58,
    ),
  ]),
  node('request', `${MODULES}/undici/lib/api/api-request.js`, 1000),
  node('helper', 'file:///elsewhere/helper.js', 5),
]);

describe('a sampling heap profile summed by stage and site', () => {
  it('counts every byte once, in the stage of the innermost named frame', () => {
    const { totalBytes, stages } = allocationsBySite(head);
    // 100 + 200 + 70 + 300 + 50 + 400 + 25 + 1000 + 5
    expect(totalBytes).toBe(2150);
    expect(Object.fromEntries(stages)).toEqual({
      'V8 and native code outside JS functions': 100,
      'Node HTTP server and sockets': 270, // parserOnIncoming 200 and the Map it made, 70
      'routing and hooks': 350, // handleProxyCall 300 and the Map it made, 50
      'log line': 425, // pino's LOG 400 and Node's write under it, 25
      'upstream request': 1000,
      other: 5,
    });
  });

  it('names a site by function, short file and first line, one per stage', () => {
    const sites = [...allocationsBySite(head).sites.values()].map(({ site, stage, bytes }) => [site, stage, bytes]);
    expect(sites).toEqual(
      expect.arrayContaining([
        ['handleProxyCall sidecar/src/http/proxy.js:59', 'routing and hooks', 300],
        ['LOG pino/lib/tools.js:47', 'log line', 400],
        ['write node:internal/fs/utils:1', 'log line', 25],
        ['Map', 'Node HTTP server and sockets', 70],
        ['Map', 'routing and hooks', 50],
        ['(V8 API)', 'V8 and native code outside JS functions', 100],
      ]),
    );
    expect(sites).toHaveLength(9);
  });
});
