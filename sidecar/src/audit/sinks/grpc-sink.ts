// kind: grpc. Batches go to a collector's tollgate.audit.v1.AuditSink/Export (proto/audit_sink.proto), each
// event as the agent's own bytes, so the collector sees every field whether Tollgate knows it or not.
// TLS and a bearer token (re-read from its file on every call, so a rotated Secret applies) are optional.

import { readFileSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import { auditSinkServiceDefinition, type ExportRequest, type ExportResponse } from '../../../../contracts/audit-sink-protocol.ts';
import { describeStatus } from '../tetragon-source.ts';
import type { AuditRecord, AuditSink } from './audit-sink.ts';
import { SinkWriteError } from './audit-sink.ts';

export interface GrpcSinkSettings {
  name: string;
  address: string;
  /** Present: TLS, with this CA (else the system roots) and server name override. */
  tls?: { caFile?: string; serverName?: string };
  bearerTokenFile?: string;
  timeoutMs: number;
  maxBatch: number;
  /** Identifies this Tollgate to the collector (ExportRequest.sender). */
  sender: string;
}

const RETRYABLE = new Set([
  grpc.status.UNAVAILABLE,
  grpc.status.DEADLINE_EXCEEDED,
  grpc.status.RESOURCE_EXHAUSTED,
  grpc.status.ABORTED,
  grpc.status.INTERNAL,
  grpc.status.CANCELLED,
  grpc.status.UNKNOWN,
]);

type ExportClient = grpc.Client & {
  export(
    request: ExportRequest,
    metadata: grpc.Metadata,
    options: grpc.CallOptions,
    callback: (error: grpc.ServiceError | null, response?: ExportResponse) => void,
  ): grpc.ClientUnaryCall;
};

export class GrpcSink implements AuditSink {
  readonly kind = 'grpc';
  readonly name: string;
  readonly maxBatch: number;
  #settings: GrpcSinkSettings;
  #client: ExportClient | undefined;

  constructor(settings: GrpcSinkSettings) {
    this.#settings = settings;
    this.name = settings.name;
    this.maxBatch = settings.maxBatch;
  }

  #connect(): ExportClient {
    if (this.#client) return this.#client;
    const { tls } = this.#settings;
    const credentials = tls ? grpc.credentials.createSsl(tls.caFile ? readFileSync(tls.caFile) : null) : grpc.credentials.createInsecure();
    const Client = grpc.makeGenericClientConstructor(auditSinkServiceDefinition(), 'AuditSink');
    this.#client = new Client(this.#settings.address, credentials, {
      ...(tls?.serverName ? { 'grpc.ssl_target_name_override': tls.serverName } : {}),
      'grpc.max_send_message_length': 64 * 1024 * 1024,
      // Reconnect quickly after a collector restart; the worker's own backoff paces the retries.
      'grpc.initial_reconnect_backoff_ms': 200,
      'grpc.max_reconnect_backoff_ms': 5_000,
    }) as unknown as ExportClient;
    return this.#client;
  }

  write(batch: readonly AuditRecord[], signal: AbortSignal): Promise<void> {
    let client: ExportClient;
    // Not waitForReady: a collector that refuses the connection (or whose name does not resolve) fails the
    // call at once with UNAVAILABLE instead of holding the batch for the whole timeoutMs. A restarting
    // collector gets its time from the worker's retries, and one that stays down from the dead-letter file
    // (ADR 1103). A collector that accepts the connection and does not answer still takes timeoutMs.
    const metadata = new grpc.Metadata();
    try {
      client = this.#connect();
      if (this.#settings.bearerTokenFile) {
        metadata.set('authorization', `Bearer ${readFileSync(this.#settings.bearerTokenFile, 'utf8').trim()}`);
      }
    } catch (error) {
      return Promise.reject(new SinkWriteError(`cannot set up the connection to ${this.#settings.address}: ${(error as Error).message}`, true));
    }
    const request: ExportRequest = {
      sender: this.#settings.sender,
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
    return new Promise((resolve, reject) => {
      const call = client.export(request, metadata, { deadline: Date.now() + this.#settings.timeoutMs }, (error) => {
        signal.removeEventListener('abort', cancel);
        if (!error) return resolve();
        if (error.code === grpc.status.UNAVAILABLE || error.code === grpc.status.DEADLINE_EXCEEDED) {
          // Dial afresh on the next attempt: the worker's backoff paces retries, not the channel's own
          // reconnect backoff, which after a long outage would outlast a collector that is already back.
          this.#client?.close();
          this.#client = undefined;
        }
        reject(new SinkWriteError(`${this.#settings.address}: ${describeStatus(error)}`, RETRYABLE.has(error.code), { cause: error }));
      });
      const cancel = () => call.cancel();
      signal.addEventListener('abort', cancel, { once: true });
    });
  }

  async close(): Promise<void> {
    this.#client?.close();
    this.#client = undefined;
  }
}
