// A proxy started beyond loopback (`--host 0.0.0.0`, a central server) has no inbound authentication: whoever
// reaches the port spends its credentials and changes its prices and upstreams. It used to start without a
// word; it now says so, and how to restrict it, in a warning an operator sees at start.

import { describe, expect, it } from 'vitest';
import { startProxyProcess } from '../e2e/proxy-process.ts';

const WARNING = 'listening beyond loopback without inbound authentication';

describe('listening beyond loopback', () => {
  it('warns naming the exposure and how to restrict it; on loopback it does not', async () => {
    const exposed = await startProxyProcess({ args: ['--host', '0.0.0.0'] });
    const quiet = await startProxyProcess({ args: ['--host', '127.0.0.1'] });
    try {
      const warning = exposed.logs.find((line) => line.msg === WARNING);
      expect(warning).toMatchObject({
        level: 40,
        host: '0.0.0.0',
        exposure: expect.stringContaining('no inbound authentication'),
        restrict: expect.stringContaining('server.allowedHosts'),
      });
      expect(quiet.logs.some((line) => line.msg === WARNING)).toBe(false);
    } finally {
      await exposed.stop();
      await quiet.stop();
    }
  });
});
