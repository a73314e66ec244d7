// The loopback server under the fake cloud token endpoints: records every request (body read whole, they
// are small), hands it to the fake's handler, and can be switched to failing for credential-failure tests.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RecordedCall {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: string;
}

export type RecordedCallHandler = (call: RecordedCall, res: ServerResponse, failing: boolean) => void;

export interface RecordingServer {
  url: string;
  calls: RecordedCall[];
  setFailing(failing: boolean): void;
  close(): Promise<void>;
}

/** `onHandlerError` answers a request whose handler threw (a malformed request the fake refuses). */
export async function startRecordingServer(
  handler: RecordedCallHandler,
  opts: { path?: string; port?: number; onHandlerError?: (error: Error, res: ServerResponse) => void } = {},
): Promise<RecordingServer> {
  const calls: RecordedCall[] = [];
  let failing = false;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const call = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
      calls.push(call);
      if (!opts.onHandlerError) return handler(call, res, failing);
      try {
        handler(call, res, failing);
      } catch (error) {
        opts.onHandlerError(error as Error, res);
      }
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, '127.0.0.1', resolve);
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}${opts.path ?? ''}`,
    calls,
    setFailing(value) {
      failing = value;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
