// What the audit fan-out costs per event on the sidecar's side: decode the agent's bytes, route to two sinks
// (a jsonl file with protojson lines, and the grpc sink's ExportRequest encoding without the network), the
// worker bookkeeping included. Events are fed as fast as the pipeline takes them, in bursts like a busy
// node's agent. Reports events/s, CPU µs per event and peak RSS. Usage:
//   node bench/audit-fan-out.ts [events=200000]

import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { mixedEvents } from '../test/fakes/tetragon-agent.ts';
import { auditSinkServiceDefinition, type ExportRequest } from '../contracts/audit-sink-protocol.ts';
import { AuditRouter } from '../sidecar/src/audit/audit-router.ts';
import type { AuditRecord, AuditSink } from '../sidecar/src/audit/sinks/audit-sink.ts';
import { JsonlSink } from '../sidecar/src/audit/sinks/jsonl-sink.ts';
import { TetragonEvent } from '../sidecar/src/audit/tetragon-protocol.ts';

const total = Number(process.argv[2] ?? 200_000);
const BURST = 1_000;

/** The grpc sink's work up to the socket: building and serializing the ExportRequest. */
class EncodeOnlySink implements AuditSink {
  readonly kind = 'grpc-encode';
  readonly name = 'collector';
  readonly maxBatch = 500;
  bytes = 0;
  #serialize = auditSinkServiceDefinition().export!.requestSerialize as (r: ExportRequest) => Buffer;
  async write(batch: readonly AuditRecord[]): Promise<void> {
    const request: ExportRequest = {
      sender: 'team-a/web-1',
      sink: this.name,
      events: batch.map((r) => ({
        tetragon_event: r.event.raw,
        received_time: { seconds: Math.floor(r.receivedAt / 1000), nanos: (r.receivedAt % 1000) * 1e6 },
        sequence: r.sequence,
        event_type: r.event.info.type,
        pod_namespace: r.event.info.podNamespace,
        pod_name: r.event.info.podName,
        node_name: r.event.info.nodeName,
      })),
    };
    this.bytes += this.#serialize(request).length;
  }
  async close(): Promise<void> {}
}

const dir = mkdtempSync(join(tmpdir(), 'tollgate-audit-bench-'));
const samples = mixedEvents([{ namespace: 'team-a', pod: 'web-1' }], 64);
const encodeOnly = new EncodeOnlySink();
const router = new AuditRouter({
  sinks: [new JsonlSink({ name: 'siem', path: join(dir, 'audit.jsonl'), rotate: { maxBytes: 2 ** 40, keep: 1 } }), encodeOnly],
  worker: { maxEvents: 20_000, maxBytes: 2 ** 30, whenFull: 'drop_newest', retry: { maxAttempts: 3, initialMs: 10, maxMs: 100 } },
  deadLetter: { path: join(dir, 'dead.jsonl'), maxBytes: 2 ** 30 },
  logger: pino({ level: 'warn' }),
});

let peakRss = 0;
let peakHeap = 0;
const rssTimer = setInterval(() => {
  peakRss = Math.max(peakRss, process.memoryUsage.rss());
  peakHeap = Math.max(peakHeap, process.memoryUsage().heapUsed);
}, 50);
const cpu0 = process.cpuUsage();
const t0 = performance.now();
for (let sent = 0; sent < total;) {
  for (let i = 0; i < BURST && sent < total; i++, sent++) router.publish(new TetragonEvent(samples[sent % samples.length]!));
  // Let the workers run between bursts, as the stream's socket reads would.
  while (router.sinks().some((s) => s.queueDepth > 10_000)) await new Promise((r) => setImmediate(r));
  await new Promise((r) => setImmediate(r));
}
const totals = await router.drain(Date.now() + 60_000);
const wall = performance.now() - t0;
const cpu = process.cpuUsage(cpu0);
clearInterval(rssTimer);
peakRss = Math.max(peakRss, process.memoryUsage.rss());

const fileBytes = statSync(join(dir, 'audit.jsonl')).size;
console.log(`events: ${total}, delivered: ${totals.map((s) => `${s.name}=${s.delivered}`).join(' ')}, dropped: ${totals.map((s) => s.dropped).join('/')}`);
console.log(`throughput: ${Math.round((total / wall) * 1000).toLocaleString('en')} events/s`);
console.log(`cpu: ${((cpu.user + cpu.system) / total).toFixed(2)} µs per event (user+system, both sinks)`);
console.log(`jsonl: ${(fileBytes / total).toFixed(0)} bytes per line; ExportRequest: ${(encodeOnly.bytes / total).toFixed(0)} bytes per event`);
console.log(`peak RSS: ${(peakRss / 1024 / 1024).toFixed(0)} MiB, peak heap used: ${(peakHeap / 1024 / 1024).toFixed(0)} MiB`);
rmSync(dir, { recursive: true, force: true });
