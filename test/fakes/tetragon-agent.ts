// A fake Tetragon agent: FineGuidanceSensors/GetEvents over real HTTP/2 gRPC framing (proto/tetragon_events.proto,
// Tetragon's field numbers), on a TCP port or a unix socket like the real agent's. Written on node:http2
// rather than a gRPC server library so a test can do what a real agent and network do to a client: restart
// (sessions vanish without a goodbye), drop the connection mid-stream, or send GOAWAY ENHANCE_YOUR_CALM
// "too_many_pings". It checks what it receives: the request must decode, and its allow_list decides which
// events each stream gets, as the agent does.
//
// Run it by hand (docs/audit.md):
//   ./tollgatew node test/fakes/tetragon-agent.ts --listen 127.0.0.1:54321 --pods team-a/web-1,team-b/api-0 --every-ms 1000

import { rmSync } from 'node:fs';
import http2 from 'node:http2';
import type { AddressInfo, Socket } from 'node:net';
import { parseArgs } from 'node:util';
import { decodeGetEventsRequest, encodeEvent, GET_EVENTS_PATH, type GetEventsRequest, TetragonEvent, type TetragonFilter } from '../../sidecar/src/audit/tetragon-protocol.ts';

export interface FakeEventSpec {
  type?: 'process_exec' | 'process_exit' | 'process_kprobe' | 'process_tracepoint';
  namespace: string;
  pod: string;
  node?: string;
  binary?: string;
  /** Distinguishes events in assertions; becomes the exec_id suffix and pid. */
  n?: number;
  /** Raw bytes appended as an extra top-level field (number 999) this project's proto does not declare. */
  unknownField?: boolean;
  /** Makes the event this many bytes larger (a long process.arguments), for tests of large events. */
  extraBytes?: number;
}

let counter = 0;

/** A GetEventsResponse as the agent would send it, with nested process, pod and container. */
export function fakeEvent(spec: FakeEventSpec): Buffer {
  const n = spec.n ?? ++counter;
  const now = Date.now();
  const process = {
    exec_id: Buffer.from(`${spec.node ?? 'node-a'}:${n}:${spec.pod}`).toString('base64'),
    pid: { value: 1000 + (n % 50_000) },
    uid: { value: 0 },
    cwd: '/app',
    binary: spec.binary ?? '/usr/bin/curl',
    arguments: `https://example.invalid/${n}${spec.extraBytes ? ` ${'a'.repeat(spec.extraBytes)}` : ''}`,
    flags: 'execve rootcwd',
    start_time: { seconds: Math.floor(now / 1000) - 5, nanos: 120_000_000 },
    auid: { value: 4294967295 },
    pod: {
      namespace: spec.namespace,
      name: spec.pod,
      container: {
        id: `containerd://${n.toString(16).padStart(12, '0')}`,
        name: 'app',
        image: { id: 'registry.invalid/app@sha256:00', name: 'registry.invalid/app:1' },
        pid: { value: 7 },
      },
      pod_labels: { app: spec.pod.replace(/-[^-]*$/, '') },
    },
    parent_exec_id: Buffer.from(`parent:${n}`).toString('base64'),
  };
  const parent = { exec_id: process.parent_exec_id, binary: '/bin/sh', pid: { value: 1 } };
  const type = spec.type ?? 'process_exec';
  const bodies = {
    process_exec: { process, parent },
    process_exit: { process, parent, signal: 'SIGKILL', status: 0 },
    process_kprobe: {
      process,
      parent,
      function_name: 'tcp_connect',
      args: [{ sock_arg: { family: 'AF_INET', type: 'SOCK_STREAM', protocol: 'IPPROTO_TCP', saddr: '10.0.0.5', daddr: '10.0.0.9', sport: 40000, dport: 443 } }],
      action: 'KPROBE_ACTION_POST',
    },
    process_tracepoint: { process, parent, subsys: 'syscalls', event: 'sys_enter_openat', args: [{ string_arg: '/etc/passwd' }, { int_arg: 0 }] },
  };
  const encoded = encodeEvent({
    [type]: bodies[type],
    node_name: spec.node ?? 'node-a',
    time: { seconds: Math.floor(now / 1000), nanos: (now % 1000) * 1e6 + (n % 1000) },
    cluster_name: 'test-cluster',
  });
  if (!spec.unknownField) return encoded;
  // field 999, wire type 2 (length-delimited): tag 999<<3|2 = 7994 = varint 0xba 0x3e
  const extra = Buffer.from(`tetragon-extension-${n}`);
  return Buffer.concat([encoded, Buffer.from([0xba, 0x3e, extra.length]), extra]);
}

export interface TcpConnectSpec {
  namespace: string;
  pod: string;
  container?: string;
  pid: number;
  binary: string;
  /** Tetragon's argv[1:], space-joined (an argument with spaces in double quotes). */
  arguments?: string;
  parentBinary?: string;
  saddr?: string;
  sport: number;
  daddr?: string;
  dport: number;
  /** Event time, epoch ms (default now). */
  atMs?: number;
  /** The process's and its parent's exec_id (default derived from the time and pid). */
  execId?: string;
  parentExecId?: string;
}

/**
 * A `process_kprobe` for the `tcp_connect` policy in Tetragon's shape (provenance.md §1.4): the connecting process
 * with its pod and container, its parent, one sock_arg in state TCP_SYN_SENT with the source port already chosen.
 */
export function tcpConnectEvent(spec: TcpConnectSpec): Buffer {
  const at = spec.atMs ?? Date.now();
  const execId = spec.execId ?? Buffer.from(`node-a:${at}:${spec.pid}`).toString('base64');
  const parentExecId = spec.parentExecId ?? Buffer.from(`node-a:1:${spec.pid - 1}`).toString('base64');
  const process = {
    exec_id: execId,
    pid: { value: spec.pid },
    uid: { value: 1000 },
    cwd: '/app',
    binary: spec.binary,
    arguments: spec.arguments ?? '',
    flags: 'execve',
    start_time: { seconds: Math.floor(at / 1000) - 3, nanos: 0 },
    auid: { value: 4294967295 },
    pod: {
      namespace: spec.namespace,
      name: spec.pod,
      container: {
        id: 'containerd://551e161c47d8ff0eb665438a7bcd5b4',
        name: spec.container ?? 'app',
        image: { id: 'registry.invalid/app@sha256:00', name: 'registry.invalid/app:1' },
        pid: { value: 7 },
      },
    },
    docker: '551e161c47d8ff0eb665438a7bcd5b4',
    parent_exec_id: parentExecId,
    refcnt: 1,
  };
  return encodeEvent({
    process_kprobe: {
      process,
      parent: { exec_id: parentExecId, pid: { value: spec.pid - 1 }, binary: spec.parentBinary ?? '/bin/sh', pod: process.pod },
      function_name: 'tcp_connect',
      args: [
        {
          sock_arg: {
            family: 'AF_INET',
            type: 'SOCK_STREAM',
            protocol: 'IPPROTO_TCP',
            saddr: spec.saddr ?? '127.0.0.1',
            daddr: spec.daddr ?? '127.0.0.1',
            sport: spec.sport,
            dport: spec.dport,
            cookie: '18446614267298931072',
            state: 'TCP_SYN_SENT',
          },
        },
      ],
      action: 'KPROBE_ACTION_POST',
      policy_name: 'monitor-tcp-connections',
    },
    node_name: 'node-a',
    time: { seconds: Math.floor(at / 1000), nanos: (at % 1000) * 1e6 },
  });
}

/** Tetragon's exec_id: base64 of "<node>:<ktime>:<pid>" (provenance.md §1.1). */
export function tetragonExecId(pid: number, ktime: number, node = 'node-a'): string {
  return Buffer.from(`${node}:${ktime}:${pid}`).toString('base64');
}

/** One process of a trail event: who, with its own and its parent's exec_id. */
export interface TrailProcessSpec {
  namespace: string;
  pod: string;
  container?: string;
  pid: number;
  execId: string;
  parentExecId: string;
  binary: string;
  /** Tetragon's argv[1:], space-joined. */
  arguments?: string;
  parentPid?: number;
  parentBinary?: string;
  /** What the agent sends with --enable-ancestors: the grandparent and up, nearest first. */
  ancestors?: { pid: number; execId: string; binary: string }[];
  /** Event time, epoch ms (default now). */
  atMs?: number;
}

export type TrailEventSpec =
  | (TrailProcessSpec & { type: 'process_exec' })
  | (TrailProcessSpec & { type: 'process_exit'; status: number; signal?: string })
  | (TrailProcessSpec & { type: 'tcp_connect'; daddr: string; dport: number; saddr?: string; sport?: number })
  /** A file-monitoring kprobe: security_file_permission(file, mask) with mask 2 (MAY_WRITE) for a write, 4 for a read. */
  | (TrailProcessSpec & { type: 'file'; path: string; mask?: number; functionName?: string });

function trailProcess(spec: TrailProcessSpec, at: number) {
  const pod = {
    namespace: spec.namespace,
    name: spec.pod,
    container: {
      id: 'containerd://551e161c47d8ff0eb665438a7bcd5b4',
      name: spec.container ?? 'app',
      image: { id: 'registry.invalid/app@sha256:00', name: 'registry.invalid/app:1' },
    },
  };
  return {
    exec_id: spec.execId,
    pid: { value: spec.pid },
    uid: { value: 1000 },
    cwd: '/app',
    binary: spec.binary,
    arguments: spec.arguments ?? '',
    flags: 'execve clone',
    start_time: { seconds: Math.floor(at / 1000), nanos: (at % 1000) * 1e6 },
    auid: { value: 4294967295 },
    pod,
    docker: '551e161c47d8ff0eb665438a7bcd5b4',
    parent_exec_id: spec.parentExecId,
    refcnt: 1,
  };
}

/**
 * A process_exec, process_exit or process_kprobe (tcp_connect, or a file kprobe) in Tetragon's shape
 * (provenance.md §1.2, §1.3), for a process with chosen pid, exec_id and parent: what the causal trail reads.
 */
export function trailEvent(spec: TrailEventSpec): Buffer {
  const at = spec.atMs ?? Date.now();
  const process = trailProcess(spec, at);
  const parent = { exec_id: spec.parentExecId, pid: { value: spec.parentPid ?? spec.pid - 1 }, binary: spec.parentBinary ?? '/bin/sh', pod: process.pod };
  const ancestors = (spec.ancestors ?? []).map((a) => ({ exec_id: a.execId, pid: { value: a.pid }, binary: a.binary, pod: process.pod }));
  const kprobe = (functionName: string, args: Record<string, unknown>[]) => ({
    process,
    parent,
    function_name: functionName,
    args,
    action: 'KPROBE_ACTION_POST',
    policy_name: 'tollgate-trail',
    ancestors,
  });
  let body: Record<string, unknown>;
  if (spec.type === 'process_exec') body = { process_exec: { process, parent, ancestors } };
  else if (spec.type === 'process_exit') body = { process_exit: { process, parent, signal: spec.signal ?? '', status: spec.status } };
  else if (spec.type === 'tcp_connect') {
    const sock = {
      family: 'AF_INET',
      type: 'SOCK_STREAM',
      protocol: 'IPPROTO_TCP',
      saddr: spec.saddr ?? '10.0.0.5',
      daddr: spec.daddr,
      sport: spec.sport ?? 41_000,
      dport: spec.dport,
      state: 'TCP_SYN_SENT',
    };
    body = { process_kprobe: kprobe('tcp_connect', [{ sock_arg: sock }]) };
  } else {
    body = { process_kprobe: kprobe(spec.functionName ?? 'security_file_permission', [{ file_arg: { mount: '', path: spec.path, flags: '' } }, { int_arg: spec.mask ?? 2 }]) };
  }
  return encodeEvent({ ...body, node_name: 'node-a', time: { seconds: Math.floor(at / 1000), nanos: (at % 1000) * 1e6 } });
}

/** The events of a mixed stream: every type, for each pod, in turn. */
export function mixedEvents(pods: { namespace: string; pod: string }[], count: number, opts: { unknownField?: boolean; node?: string; extraBytes?: number } = {}): Buffer[] {
  const types = ['process_exec', 'process_kprobe', 'process_tracepoint', 'process_exit'] as const;
  const out: Buffer[] = [];
  for (let i = 0; i < count; i++) {
    const pod = pods[i % pods.length]!;
    const n = ++counter;
    out.push(fakeEvent({ ...pod, type: types[Math.floor(n / pods.length) % types.length]!, n, ...opts }));
  }
  return out;
}

function eventPod(event: Buffer): { namespace: string; name: string } {
  // Decoded through the project's proto, so the fake and the client agree on field numbers or the test fails.
  const { info } = new TetragonEvent(event);
  return { namespace: info.podNamespace, name: info.podName };
}

/** Tetragon's allow-list semantics for the fields this fake supports (namespace, pod_regex). */
export function matches(filters: TetragonFilter[] | undefined, pod: { namespace: string; name: string }): boolean {
  if (!filters || filters.length === 0) return true;
  return filters.some((f) => (!f.namespace?.length || f.namespace.includes(pod.namespace)) && (!f.pod_regex?.length || f.pod_regex.some((r) => new RegExp(r).test(pod.name))));
}

function frame(message: Buffer): Buffer {
  const header = Buffer.alloc(5);
  header.writeUInt32BE(message.length, 1);
  return Buffer.concat([header, message]);
}

interface Subscriber {
  stream: http2.ServerHttp2Stream;
  request: GetEventsRequest;
  sent: number;
}

export interface FakeTetragonAgent {
  /** `unix:///...` or `127.0.0.1:PORT`, as a client's config names it. */
  address: string;
  /** Every GetEvents request received, decoded. */
  requests: GetEventsRequest[];
  subscribers(): number;
  waitForSubscribers(n: number, timeoutMs?: number): Promise<void>;
  /** Sends each event to every open stream whose allow_list matches it; returns how many stream writes. */
  emit(events: Buffer[]): number;
  /** Sends each message as it is to every open stream, filters aside: what a broken agent would send. */
  emitRaw(messages: Buffer[]): number;
  /** Destroys every connection without a goodbye, as a crashed or restarted agent's do. */
  dropConnections(): void;
  /** GOAWAY ENHANCE_YOUR_CALM with debug data "too_many_pings" on every session, then closes them. */
  goAway(): void;
  /** Stops listening and kills every connection, then listens again on the same address after `downMs`. */
  restart(downMs?: number): Promise<void>;
  stop(): Promise<void>;
}

export async function startFakeTetragonAgent(opts: { listen?: string } = {}): Promise<FakeTetragonAgent> {
  const requests: GetEventsRequest[] = [];
  const subscribers = new Set<Subscriber>();
  const sessions = new Set<http2.ServerHttp2Session>();
  const sockets = new Set<Socket>();
  const waiters: (() => void)[] = [];
  const listen = opts.listen ?? '127.0.0.1:0';
  const socketPath = listen.startsWith('unix://') ? listen.slice('unix://'.length) : undefined;

  const onStream = (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => {
    if (headers[':path'] !== GET_EVENTS_PATH || headers['content-type']?.startsWith('application/grpc') !== true) {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '12', 'grpc-message': `fake agent serves only ${GET_EVENTS_PATH}` }, { endStream: true });
      return;
    }
    const chunks: Buffer[] = [];
    let subscribed = false;
    stream.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      const all = Buffer.concat(chunks);
      if (subscribed || all.length < 5) return;
      const length = all.readUInt32BE(1);
      if (all.length < 5 + length) return;
      subscribed = true;
      let request: GetEventsRequest;
      try {
        request = decodeGetEventsRequest(all.subarray(5, 5 + length));
      } catch (error) {
        stream.respond(
          { ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '3', 'grpc-message': `bad GetEventsRequest: ${(error as Error).message}` },
          { endStream: true },
        );
        return;
      }
      requests.push(request);
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' });
      const subscriber = { stream, request, sent: 0 };
      subscribers.add(subscriber);
      stream.on('close', () => subscribers.delete(subscriber));
      for (const wake of waiters.splice(0)) wake();
    });
    stream.on('error', () => undefined);
  };

  let server: http2.Http2Server;
  /** Listens on `unix:///path` or `host:port`; returns the address clients dial. */
  const listenAt = async (where: string): Promise<string> => {
    server = http2.createServer();
    server.on('stream', onStream);
    server.on('session', (session) => {
      sessions.add(session);
      session.on('close', () => sessions.delete(session));
      session.on('error', () => undefined);
    });
    server.on('connection', (socket: Socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    });
    const path = where.startsWith('unix://') ? where.slice('unix://'.length) : undefined;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      if (path) {
        rmSync(path, { force: true });
        server.listen(path, resolve);
      } else {
        const at = where.lastIndexOf(':');
        server.listen(Number(where.slice(at + 1)), where.slice(0, at).replace(/^\[|\]$/g, ''), resolve);
      }
    });
    if (path) return `unix://${path}`;
    const { address, port } = server.address() as AddressInfo;
    return `${address.includes(':') ? `[${address}]` : address}:${port}`;
  };

  const killAll = () => {
    for (const socket of sockets) socket.destroy();
    for (const session of sessions) session.destroy();
    subscribers.clear();
  };

  // A restart comes back on the same address (port 0 resolved once), as the agent's flag would.
  let address = await listenAt(listen);

  const agent: FakeTetragonAgent = {
    get address() {
      return address;
    },
    requests,
    subscribers: () => subscribers.size,
    waitForSubscribers(n, timeoutMs = 20_000) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`fake agent: ${subscribers.size} subscriber(s) after ${timeoutMs} ms, wanted ${n}`)), timeoutMs);
        const check = () => {
          if (subscribers.size >= n) {
            clearTimeout(timer);
            resolve();
          } else waiters.push(check);
        };
        check();
      });
    },
    emit(events) {
      let writes = 0;
      for (const event of events) {
        const pod = eventPod(event);
        const framed = frame(event);
        for (const s of subscribers) {
          if (!matches(s.request.allow_list, pod) || (s.request.deny_list?.length && matches(s.request.deny_list, pod))) continue;
          if (s.stream.destroyed || s.stream.closed) continue;
          s.stream.write(framed);
          s.sent++;
          writes++;
        }
      }
      return writes;
    },
    emitRaw(messages) {
      let writes = 0;
      for (const message of messages) {
        const framed = frame(message);
        for (const s of subscribers) {
          if (s.stream.destroyed || s.stream.closed) continue;
          s.stream.write(framed);
          s.sent++;
          writes++;
        }
      }
      return writes;
    },
    dropConnections: killAll,
    goAway() {
      for (const session of sessions) {
        session.goaway(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM, 0, Buffer.from('too_many_pings'));
        setTimeout(() => session.destroy(), 50);
      }
      subscribers.clear();
    },
    async restart(downMs = 200) {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      killAll();
      await closed;
      await new Promise((resolve) => setTimeout(resolve, downMs));
      address = await listenAt(address);
    },
    async stop() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      killAll();
      await closed;
      if (socketPath) rmSync(socketPath, { force: true });
    },
  };

  return agent;
}

async function main(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      listen: { type: 'string', default: '127.0.0.1:54321' },
      pods: { type: 'string', default: 'team-a/web-1,team-a/web-2,team-b/api-0' },
      'every-ms': { type: 'string', default: '1000' },
      node: { type: 'string', default: 'node-a' },
    },
  });
  const pods = values.pods.split(',').map((p) => {
    const [namespace, pod] = p.split('/');
    if (!namespace || !pod) throw new Error(`--pods: ${JSON.stringify(p)} is not namespace/pod`);
    return { namespace, pod };
  });
  const agent = await startFakeTetragonAgent({ listen: values.listen });
  process.stdout.write(
    `fake tetragon agent listening on ${agent.address}; one mixed event per pod every ${values['every-ms']} ms for ${pods.map((p) => `${p.namespace}/${p.pod}`).join(', ')}\n`,
  );
  setInterval(() => {
    const sent = agent.emit(mixedEvents(pods, pods.length, { node: values.node }));
    if (agent.subscribers() > 0) process.stdout.write(`sent ${sent} event(s) to ${agent.subscribers()} stream(s)\n`);
  }, Number(values['every-ms']));
  const stop = () => void agent.stop().then(() => process.exit(0));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

if (import.meta.url === `file://${process.argv[1]}`) await main(process.argv.slice(2));
