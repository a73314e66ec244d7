// tollgate.audit.v1.AuditSink (proto/audit_sink.proto) as TypeScript: the service definition with its
// serializers, shared by the grpc sink (client) and any collector written in TypeScript (the test fake).

import { fileURLToPath } from 'node:url';
import type * as grpc from '@grpc/grpc-js';
import protobuf from 'protobufjs';

export const AUDIT_SINK_PROTO = fileURLToPath(new URL('../proto/audit_sink.proto', import.meta.url));

export interface ExportedEvent {
  /** The GetEventsResponse bytes as the agent sent them. */
  tetragon_event: Buffer;
  received_time?: { seconds: number; nanos: number };
  sequence: number | string;
  event_type: string;
  pod_namespace: string;
  pod_name: string;
  node_name: string;
}

export interface ExportRequest {
  events: ExportedEvent[];
  sender: string;
  sink: string;
}

export interface ExportResponse {
  accepted: number;
}

let root: protobuf.Root | undefined;

function lookup(name: string): protobuf.Type {
  root ??= new protobuf.Root().loadSync(AUDIT_SINK_PROTO, { keepCase: true });
  return root.lookupType(`tollgate.audit.v1.${name}`);
}

function codec<T>(name: string) {
  const type = lookup(name);
  return {
    serialize: (value: T) => Buffer.from(type.encode(type.fromObject(value as Record<string, unknown>)).finish()),
    deserialize: (bytes: Buffer) => type.toObject(type.decode(bytes), { longs: String, defaults: true, arrays: true }) as T,
  };
}

let definition: grpc.ServiceDefinition | undefined;

export function auditSinkServiceDefinition(): grpc.ServiceDefinition {
  if (definition) return definition;
  const request = codec<ExportRequest>('ExportRequest');
  const response = codec<ExportResponse>('ExportResponse');
  definition = {
    export: {
      path: '/tollgate.audit.v1.AuditSink/Export',
      requestStream: false,
      responseStream: false,
      requestSerialize: request.serialize,
      requestDeserialize: (bytes: Buffer) => {
        const decoded = request.deserialize(bytes);
        // protobufjs hands out views into the message buffer; copies keep each event's bytes on their own.
        for (const e of decoded.events) e.tetragon_event = Buffer.from(e.tetragon_event);
        return decoded;
      },
      responseSerialize: response.serialize,
      responseDeserialize: response.deserialize,
    },
  };
  return definition;
}
