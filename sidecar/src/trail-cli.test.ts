// `tollgate trail` against the management API's trail route on a real fastify listener, fed by a stand-in
// source that answers one known trail (the e2e test asks a real proxy).

import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../test/support/cli-run.ts';
import { trailRoutes } from './http/trail.ts';
import type { TrailJson } from './provenance/trail-view.ts';
import { main } from './trail-cli.ts';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const TRAIL: TrailJson = {
  trace_id: TRACE,
  window_ms: 30_000,
  calls: [
    {
      span_id: '00f067aa0ba902b7',
      model: 'gpt-4o-mini',
      route: 'beta',
      started: '2026-11-29T09:00:00.000Z',
      ended: '2026-11-29T09:00:01.000Z',
      process: { pid: 4242, exec_id: 'ZXhlYw==', executable_path: '/usr/bin/python3', command_args: null, container_name: 'app' },
      tool_calls: [{ id: 'call_1', name: 'run_shell', arguments_sha256: '9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08' }],
      actions: [
        {
          kind: 'exec',
          time: '2026-11-29T09:00:01.100Z',
          pid: 4300,
          exec_id: 'c2g=',
          parent_exec_id: 'ZXhlYw==',
          binary: '/bin/sh',
          arguments: ['/bin/sh', '-c', 'curl -sS https://example.com'],
          children: [
            {
              kind: 'connect',
              time: '2026-11-29T09:00:01.150Z',
              pid: 4300,
              exec_id: 'c2g=',
              parent_exec_id: 'ZXhlYw==',
              binary: '/bin/sh',
              destination: '93.184.216.34:443',
              children: [],
            },
            { kind: 'file', time: '2026-11-29T09:00:01.160Z', pid: 4300, exec_id: 'c2g=', parent_exec_id: 'ZXhlYw==', binary: '/bin/sh', path: '/tmp/out.txt', children: [] },
            { kind: 'exit', time: '2026-11-29T09:00:01.300Z', pid: 4300, exec_id: 'c2g=', parent_exec_id: 'ZXhlYw==', binary: '/bin/sh', exit_code: 0, children: [] },
          ],
        },
      ],
    },
  ],
};

let app: FastifyInstance;
let url: string;

beforeAll(async () => {
  app = Fastify();
  await app.register(trailRoutes, { trail: { trail: (traceId) => (traceId === TRACE ? TRAIL : null) } });
  url = await app.listen({ host: '127.0.0.1', port: 0 });
});

afterAll(async () => {
  await app.close();
});

function trail(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return runCli(main, args);
}

describe('tollgate trail', () => {
  it('prints the chain as an indented tree, times after the answer', async () => {
    const { code, stdout } = await trail([TRACE, '--url', url]);
    expect(code).toBe(0);
    expect(stdout).toBe(
      [
        `trace ${TRACE} (actions up to 30s after each answer)`,
        'call 00f067aa0ba902b7: gpt-4o-mini on beta, 2026-11-29T09:00:00.000Z to 2026-11-29T09:00:01.000Z',
        '  caller pid 4242 /usr/bin/python3 (container app)',
        '  answer: 1 tool call',
        '    tool call run_shell call_1 arguments sha256 9f86d081884c',
        '  then:',
        '    +0.100s exec pid 4300 /bin/sh -c "curl -sS https://example.com"',
        '      +0.150s connect pid 4300 /bin/sh -> 93.184.216.34:443',
        '      +0.160s file pid 4300 /bin/sh wrote /tmp/out.txt',
        '      +0.300s exit pid 4300 /bin/sh exit code 0',
        '',
      ].join('\n'),
    );
  });

  it('prints the API body with --format json', async () => {
    const { code, stdout } = await trail([TRACE, '--url', `${url}/`, '--format', 'json']);
    expect(code).toBe(0);
    expect(JSON.parse(stdout)).toEqual(TRAIL);
  });

  it('exits 1 naming the proxy’s reason for a trace it keeps no trail of', async () => {
    const { code, stderr } = await trail(['5bf92f3577b34da6a3ce929d0e0e4737', '--url', url]);
    expect(code).toBe(1);
    expect(stderr).toContain('the proxy answered 404: no causal trail is kept for trace 5bf92f3577b34da6a3ce929d0e0e4737');
  });

  it('exits 2 for a malformed id, a missing id, or a bad flag, and asks nothing for the last two', async () => {
    expect(await trail(['not-a-trace', '--url', url])).toMatchObject({ code: 2, stderr: expect.stringContaining('trace id must be 32 hex digits') as unknown });
    expect(await trail(['--url', url])).toMatchObject({ code: 2, stderr: expect.stringContaining('give one trace id') as unknown });
    expect(await trail([TRACE, '--format', 'xml', '--url', url])).toMatchObject({ code: 2, stderr: expect.stringContaining('--format must be one of text, json') as unknown });
    expect(await trail([TRACE, '--url', 'ftp://proxy'])).toMatchObject({ code: 2, stderr: expect.stringContaining('--url must be') as unknown });
  });
});
