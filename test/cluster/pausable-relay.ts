// A loopback TCP relay in front of the API server, so a test can cut a client off while the cluster goes on
// changing: `refuse()` drops every open connection and resets new ones (an unreachable server), `blackhole()`
// keeps connections open but stops forwarding in both directions (a half-open connection), `resume()` relays
// new connections again. TLS passes through untouched, so the client still verifies the API server's certificate.

import { createServer, connect, type Server, type Socket } from 'node:net';

export type RelayMode = 'relay' | 'refuse' | 'blackhole';

interface Pair {
  client: Socket;
  upstream: Socket;
  /** Bytes in either direction are dropped. */
  swallowed: boolean;
}

export interface PausableRelay {
  /** https://127.0.0.1:PORT, for a kubeconfig's cluster.server. */
  url: string;
  /** Connections accepted since the last resetCount(), whatever the mode. */
  connections(): number;
  resetCount(): void;
  refuse(): void;
  blackhole(): void;
  resume(): void;
  close(): Promise<void>;
}

export async function startPausableRelay(target: { host: string; port: number }): Promise<PausableRelay> {
  let mode: RelayMode = 'relay';
  let accepted = 0;
  const pairs = new Set<Pair>();

  const server: Server = createServer((client) => {
    accepted += 1;
    if (mode === 'refuse') {
      client.resetAndDestroy();
      return;
    }
    const upstream = connect(target.port, target.host);
    const pair: Pair = { client, upstream, swallowed: mode === 'blackhole' };
    pairs.add(pair);
    const drop = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    // Data is forwarded by hand rather than piped so that blackhole() can swallow it on live connections.
    client.on('data', (chunk) => {
      if (!pair.swallowed) upstream.write(chunk);
    });
    upstream.on('data', (chunk) => {
      if (!pair.swallowed) client.write(chunk);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('relay has no TCP address');

  return {
    url: `https://127.0.0.1:${address.port}`,
    connections: () => accepted,
    resetCount: () => {
      accepted = 0;
    },
    refuse() {
      mode = 'refuse';
      for (const { client, upstream } of pairs) {
        client.resetAndDestroy();
        upstream.destroy();
      }
      pairs.clear();
    },
    blackhole() {
      mode = 'blackhole';
      // A connection that lost bytes can never carry TLS again: it stays swallowed after resume(), as a
      // half-open connection would, and only a client that gives up on it recovers.
      for (const pair of pairs) pair.swallowed = true;
    },
    resume() {
      mode = 'relay';
    },
    async close() {
      for (const { client, upstream } of pairs) {
        client.destroy();
        upstream.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
