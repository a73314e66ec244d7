// A collector implementing tollgate.audit.v1.AuditSink (proto/audit_sink.proto) on a real gRPC server: what a
// security team would run behind a Tollgate `grpc` sink. It records every Export, can answer with an error
// status or stall (no answer until released), checks the bearer token when given one, and restarts on the
// same port.
//
// Run it by hand (docs/audit.md):
//   ./tollgatew node test/fakes/audit-collector.ts --listen 127.0.0.1:4317

import * as grpc from '@grpc/grpc-js';
import { parseArgs } from 'node:util';
import { auditSinkServiceDefinition, type ExportRequest, type ExportResponse } from '../../contracts/audit-sink-protocol.ts';
import { TetragonEvent } from '../../sidecar/src/audit/tetragon-protocol.ts';

export interface FakeAuditCollector {
  address: string;
  /** Every accepted batch, in arrival order. */
  batches: ExportRequest[];
  /** Calls received, accepted or not. */
  calls: number;
  /** Authorization headers received. */
  authorizations: string[];
  events(): ExportRequest['events'];
  /** Answer every call with this status (undefined: accept). */
  failWith(code: grpc.status | undefined): void;
  /** Hold every call unanswered until resume(). */
  stall(): void;
  resume(): void;
  waitForEvents(n: number, timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
  /** Listens again on the same port. */
  start(): Promise<void>;
}

export async function startFakeAuditCollector(opts: { listen?: string; token?: string; onBatch?: (batch: ExportRequest) => void } = {}): Promise<FakeAuditCollector> {
  const batches: ExportRequest[] = [];
  const authorizations: string[] = [];
  let failing: grpc.status | undefined;
  let stalled: (() => void)[] | undefined;
  const waiters: (() => void)[] = [];
  let server: grpc.Server | undefined;
  let address = opts.listen ?? '127.0.0.1:0';
  const state = { calls: 0 };
  const count = () => batches.reduce((n, b) => n + b.events.length, 0);

  const handler = (call: grpc.ServerUnaryCall<ExportRequest, ExportResponse>, callback: grpc.sendUnaryData<ExportResponse>) => {
    state.calls++;
    const auth = call.metadata.get('authorization')[0];
    if (typeof auth === 'string') authorizations.push(auth);
    const answer = () => {
      if (opts.token !== undefined && auth !== `Bearer ${opts.token}`) {
        callback({ code: grpc.status.UNAUTHENTICATED, details: 'bearer token missing or wrong' });
        return;
      }
      if (failing !== undefined) {
        callback({ code: failing, details: `collector set to fail with ${grpc.status[failing]}` });
        return;
      }
      const request = call.request;
      for (const e of request.events) new TetragonEvent(e.tetragon_event); // refuse bytes that are not an event
      batches.push(request);
      opts.onBatch?.(request);
      callback(null, { accepted: request.events.length });
      for (const wake of waiters.splice(0)) wake();
    };
    if (stalled) stalled.push(answer);
    else answer();
  };

  const start = async () => {
    server = new grpc.Server({ 'grpc.max_receive_message_length': 64 * 1024 * 1024 });
    server.addService(auditSinkServiceDefinition(), { export: handler });
    const port = await new Promise<number>((resolve, reject) =>
      server!.bindAsync(address, grpc.ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))),
    );
    address = `${address.slice(0, address.lastIndexOf(':'))}:${port}`;
  };
  await start();

  return {
    get address() {
      return address;
    },
    batches,
    get calls() {
      return state.calls;
    },
    authorizations,
    events: () => batches.flatMap((b) => b.events),
    failWith(code) {
      failing = code;
    },
    stall() {
      stalled ??= [];
    },
    resume() {
      const held = stalled ?? [];
      stalled = undefined;
      for (const answer of held) answer();
    },
    waitForEvents(n, timeoutMs = 20_000) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`fake collector: ${count()} event(s) after ${timeoutMs} ms, wanted ${n}`)), timeoutMs);
        const check = () => {
          if (count() >= n) {
            clearTimeout(timer);
            resolve();
          } else waiters.push(check);
        };
        check();
      });
    },
    async stop() {
      const s = server;
      server = undefined;
      s?.forceShutdown();
    },
    start,
  };
}

async function main(argv: string[]): Promise<void> {
  const { values } = parseArgs({ args: argv, options: { listen: { type: 'string', default: '127.0.0.1:4317' }, token: { type: 'string' } } });
  const collector = await startFakeAuditCollector({
    listen: values.listen,
    ...(values.token ? { token: values.token } : {}),
    onBatch: (batch) => {
      for (const e of batch.events) {
        const event = new TetragonEvent(e.tetragon_event);
        process.stdout.write(`${batch.sender} #${e.sequence} ${e.event_type} ${e.pod_namespace}/${e.pod_name} ${event.info.binary} (${e.tetragon_event.length} bytes)\n`);
      }
    },
  });
  process.stdout.write(`fake audit collector (tollgate.audit.v1.AuditSink) listening on ${collector.address}\n`);
  const stop = () => void collector.stop().then(() => process.exit(0));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

if (import.meta.url === `file://${process.argv[1]}`) await main(process.argv.slice(2));
