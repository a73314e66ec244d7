// A raw-socket HTTP/1.1 client: bytes go out exactly as written, so a test can send what no HTTP library
// will (a `#` or a tab in the target, a bad percent-encoding, 17 KB of headers, a body that trickles), and
// reads back whatever the server answers, or notices that it cut the connection.

import { connect } from 'node:net';

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** Everything the server sent. */
  raw: string;
}

export interface RawOptions {
  /** While open, write one more byte of body this often. */
  trickleMs?: number;
  /** Close from this side after this long without the server having closed (a server that never answers). */
  giveUpMs?: number;
}

export function parseRawResponse(raw: string): RawResponse {
  const split = raw.indexOf('\r\n\r\n');
  const head = split === -1 ? raw : raw.slice(0, split);
  const [statusLine = '', ...lines] = head.split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  let body = split === -1 ? '' : raw.slice(split + 4);
  if (headers['transfer-encoding'] === 'chunked') body = dechunk(body);
  return { status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1] ?? 0), headers, body, raw };
}

function dechunk(text: string): string {
  let out = '';
  let at = 0;
  for (;;) {
    const eol = text.indexOf('\r\n', at);
    if (eol === -1) return out;
    const size = Number.parseInt(text.slice(at, eol), 16);
    if (!size) return out;
    out += text.slice(eol + 2, eol + 2 + size);
    at = eol + 2 + size + 2;
  }
}

/**
 * Sends `request` as written on a new connection and resolves with what came back once the connection closes
 * (the server closes it after answering a `Connection: close` request, or this side after `giveUpMs`).
 */
export function rawRequest(port: number, request: string | Buffer, opts: RawOptions = {}): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let received = '';
    let trickle: NodeJS.Timeout | undefined;
    const giveUp = opts.giveUpMs === undefined ? undefined : setTimeout(() => socket.destroy(), opts.giveUpMs);
    socket.setEncoding('latin1');
    socket.on('data', (text: string) => (received += text));
    socket.once('connect', () => {
      socket.write(request);
      if (opts.trickleMs !== undefined) trickle = setInterval(() => socket.writable && socket.write('a'), opts.trickleMs);
      // No half-close: Node's server takes an early FIN for a caller that left and drops its call.
    });
    // A reset after the answer arrived is the server closing a connection it is done with.
    socket.once('error', (error) => (received === '' ? reject(error) : undefined));
    socket.once('close', () => {
      clearInterval(trickle);
      clearTimeout(giveUp);
      resolve(parseRawResponse(received));
    });
  });
}

/** A request with `Connection: close`, CRLF line ends, and a Host of 127.0.0.1 unless `headers` names one. */
export function httpRequest(method: string, target: string, headers: Record<string, string> = {}, body = ''): string {
  const all: Record<string, string> = { host: '127.0.0.1', connection: 'close', ...headers };
  if (body !== '' && all['content-length'] === undefined) all['content-length'] = String(Buffer.byteLength(body));
  return `${method} ${target} HTTP/1.1\r\n${Object.entries(all)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('')}\r\n${body}`;
}
