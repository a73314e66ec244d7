import { once } from 'node:events';
import { createServer as createHttpServer, request as httpRequest, type ServerResponse } from 'node:http';
import { connect, constants, createServer, type Http2ServerResponse } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { answerFinished, callerGone, onCallerLeaving } from './caller-connection.ts';

const servers: Array<{ close(): void }> = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.close();
});

/** What the proxy sees when an HTTP/2 caller resets its stream after the first bytes of an answer. */
async function resetAfterFirstBytes(): Promise<{ answerFinished: boolean; callerGone: boolean; nodeSaysFinished: boolean }> {
  let seen!: { answerFinished: boolean; callerGone: boolean; nodeSaysFinished: boolean };
  const closed = new Promise<void>((resolve) => {
    const server = createServer((_req, res: Http2ServerResponse) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      // Written and flushed: nothing is buffered when the reset arrives, the case where Node ends the stream itself.
      res.write('data: {"type":"message_start"}\n\n');
      res.once('close', () => {
        const raw = res as unknown as ServerResponse;
        seen = { answerFinished: answerFinished(raw), callerGone: callerGone(raw), nodeSaysFinished: res.writableFinished };
        resolve();
      });
    });
    servers.push(server);
    server.listen(0, '127.0.0.1', () => {
      const session = connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
      servers.push(session);
      const stream = session.request({ ':path': '/' });
      stream.end();
      stream.once('data', () => stream.close(constants.NGHTTP2_CANCEL));
    });
  });
  await closed;
  return seen;
}

describe('the caller connection over HTTP/2', () => {
  it('a stream the caller resets mid-answer is not a finished answer, whatever Node reports for it', async () => {
    const seen = await resetAfterFirstBytes();
    expect(seen.answerFinished).toBe(false);
    expect(seen.callerGone).toBe(true);
  });

  it('an answer ended by the proxy is finished', async () => {
    const server = createServer((_req, res) => res.end('whole answer'));
    servers.push(server);
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const finished = new Promise<boolean>((resolve) => server.once('stream', (stream) => stream.once('close', () => resolve(true))));
    const session = connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    servers.push(session);
    let last!: ServerResponse;
    server.prependListener('request', (_req, res) => {
      last = res as unknown as ServerResponse;
    });
    const stream = session.request({ ':path': '/' });
    stream.end();
    stream.resume();
    await once(stream, 'end');
    await finished;
    expect(answerFinished(last)).toBe(true);
    expect(callerGone(last)).toBe(false);
  });
});

describe('noticing a caller who leaves (HTTP/1.1)', () => {
  /** A caller the test hangs up, or lets read its answer; resolves with how often `left` was called. */
  async function leaves(whenAsked: 'after the caller left' | 'before an answer is ended'): Promise<number> {
    let calls = 0;
    const reached = Promise.withResolvers<void>();
    const settled = Promise.withResolvers<void>();
    const server = createHttpServer((req, res) => {
      if (whenAsked === 'after the caller left') {
        // Asked only once the connection is gone: its close was emitted before anyone listened.
        res.once('close', () =>
          setImmediate(() => {
            onCallerLeaving(res, () => calls++);
            settled.resolve();
          }),
        );
        reached.resolve();
        return;
      }
      onCallerLeaving(res, () => calls++);
      res.once('close', () => setImmediate(settled.resolve));
      req.resume();
      res.end('whole answer');
    });
    servers.push(server);
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const req = httpRequest({ host: '127.0.0.1', port: (server.address() as AddressInfo).port, path: '/', agent: false });
    req.on('error', () => undefined);
    req.on('response', (res) => res.resume());
    req.end();
    if (whenAsked === 'after the caller left') {
      await reached.promise;
      req.destroy();
    }
    await settled.promise;
    return calls;
  }

  it('is told at once about a caller already gone, which a close listener added then would never hear', async () => {
    expect(await leaves('after the caller left')).toBe(1);
  });

  it('is not told about a caller whose whole answer was handed over', async () => {
    expect(await leaves('before an answer is ended')).toBe(0);
  });
});
