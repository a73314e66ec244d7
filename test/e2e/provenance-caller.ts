// A client process for the provenance e2e test: opens one TCP connection to `url`, prints its pid and the
// connection's source port (what Tetragon's tcp_connect would show), waits for `go` on stdin, then sends one
// POST over that connection and prints the answer's status and span id. Like an agent, it keeps running (and
// its connection open) until its stdin ends.
//   node test/e2e/provenance-caller.ts <url> <path> [bearer key]      (CALLER_PROTOCOL=h2: HTTP/2 with prior knowledge)

import { request } from 'node:http';
import { connect as connectH2 } from 'node:http2';
import { connect } from 'node:net';
import { createInterface } from 'node:readline';

const [url, path, key] = process.argv.slice(2);
const target = new URL(url!);
const socket = connect(Number(target.port), target.hostname);
socket.once('connect', () => {
  process.stdout.write(`${JSON.stringify({ pid: process.pid, sport: socket.localPort })}\n`);
  const input = createInterface({ input: process.stdin });
  input.once('close', () => process.exit(0));
  input.once('line', () => {
    if (process.env.CALLER_PROTOCOL === 'h2') {
      callH2();
      return;
    }
    const body = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] });
    // Without an agent Node's client asks to close the connection after the answer; an agent keeps it.
    const headers: Record<string, string> = { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), connection: 'keep-alive' };
    if (key) headers.authorization = `Bearer ${key}`;
    const req = request({ createConnection: () => socket, host: target.hostname, port: target.port, method: 'POST', path, headers }, (res) => {
      res.resume();
      res.on('end', () => {
        process.stdout.write(`${JSON.stringify({ status: res.statusCode, spanId: res.headers['x-proxy-span-id'] ?? null })}\n`);
      });
    });
    req.on('error', (error) => {
      process.stdout.write(`${JSON.stringify({ error: error.message })}\n`);
      process.exit(1);
    });
    req.end(body);
  });
});

/** The same call over HTTP/2 on the same connection (h2c, as the AWS SDK's Bedrock client speaks it). */
function callH2(): void {
  const session = connectH2(url!, { createConnection: () => socket });
  const body = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] });
  const stream = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) });
  stream.on('response', (headers) => {
    stream.resume();
    stream.on('end', () => process.stdout.write(`${JSON.stringify({ status: headers[':status'], spanId: headers['x-proxy-span-id'] ?? null })}\n`));
  });
  stream.end(body);
}
