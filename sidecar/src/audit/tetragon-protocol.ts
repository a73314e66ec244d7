// Tetragon's GetEvents over gRPC as this project reads it (proto/tetragon_events.proto). The stream is
// consumed with a pass-through deserializer, so each event stays the exact bytes the agent sent; it is then
// decoded once for what routing needs (type, pod, node, time) and, only when a sink wants JSON, printed as
// protojson from the same decoded message.

import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import protobuf from 'protobufjs';
import { timestampToRfc3339, toProtoJson } from './protojson.ts';

export const TETRAGON_PROTO = fileURLToPath(new URL('../../../proto/tetragon_events.proto', import.meta.url));
export const GET_EVENTS_PATH = '/tetragon.FineGuidanceSensors/GetEvents';

/** One allow or deny filter, in the proto's own field names. */
export interface TetragonFilter {
  namespace?: string[];
  pod_regex?: string[];
  binary_regex?: string[];
  event_set?: string[];
  labels?: string[];
}

export interface GetEventsRequest {
  allow_list?: TetragonFilter[];
  deny_list?: TetragonFilter[];
}

let root: protobuf.Root | undefined;

export function tetragonRoot(): protobuf.Root {
  // keepCase: the proto's own snake_case names, which are also protojson's (UseProtoNames) keys.
  root ??= new protobuf.Root().loadSync(TETRAGON_PROTO, { keepCase: true });
  return root;
}

function type(name: string): protobuf.Type {
  return tetragonRoot().lookupType(`tetragon.${name}`);
}

export function encodeGetEventsRequest(request: GetEventsRequest): Buffer {
  const t = type('GetEventsRequest');
  return Buffer.from(t.encode(t.fromObject(request)).finish());
}

export function decodeGetEventsRequest(bytes: Uint8Array): GetEventsRequest {
  const t = type('GetEventsRequest');
  return t.toObject(t.decode(bytes), { enums: String, arrays: false });
}

/** What the router needs of an event, read once when it arrives. */
export interface TetragonEventInfo {
  /** The oneof member: process_exec, process_kprobe, ...; `event_<n>` for a type this proto does not know. */
  type: string;
  nodeName: string;
  /** protojson time, '' when absent. */
  time: string;
  podNamespace: string;
  podName: string;
  execId: string;
  binary: string;
}

const NON_EVENT_FIELDS = new Set([1000, 1001, 1002, 1003, 1004]);

/** The field number of the event oneof member, read off the wire (so unknown event types are named too). */
function eventFieldNumber(raw: Uint8Array): number | undefined {
  const reader = protobuf.Reader.create(raw);
  while (reader.pos < reader.len) {
    const tag = reader.uint32();
    const field = tag >>> 3;
    if (!NON_EVENT_FIELDS.has(field)) return field;
    reader.skipType(tag & 7);
  }
  return undefined;
}

/** A decoded event: the bytes as received and a view of them. Decoding errors throw (the caller counts them). */
export class TetragonEvent {
  readonly raw: Buffer;
  readonly info: TetragonEventInfo;
  #json: string | undefined;

  constructor(raw: Buffer) {
    const responseType = type('GetEventsResponse');
    this.raw = raw;
    // The decoded tree is not kept: queued events would hold several times their size in objects. json()
    // decodes again, once, when a sink asks for it.
    const message = responseType.decode(raw) as protobuf.Message & Record<string, unknown>;
    const number = eventFieldNumber(raw);
    const field = number === undefined ? undefined : responseType.fieldsById[number];
    const eventType = field?.name ?? (number === undefined ? 'none' : `event_${number}`);
    const body = field ? (message[field.name] as Record<string, unknown> | undefined) : undefined;
    const process = body?.process as Record<string, unknown> | undefined;
    const pod = process?.pod as Record<string, unknown> | undefined;
    // seconds is an int64: a protobufjs Long (whose toString gives the digits) or a number
    const time = message.time as { seconds?: number | { toString(): string }; nanos?: number } | undefined;
    this.info = {
      type: eventType,
      nodeName: (message.node_name as string | undefined) ?? '',
      time: time ? timestampToRfc3339(Number(String(time.seconds ?? 0)), time.nanos ?? 0) : '',
      podNamespace: (pod?.namespace as string | undefined) ?? '',
      podName: (pod?.name as string | undefined) ?? '',
      execId: (process?.exec_id as string | undefined) ?? '',
      binary: (process?.binary as string | undefined) ?? '',
    };
  }

  /** The event as one protojson line (without newline), computed once and shared by every sink. */
  json(): string {
    if (this.#json === undefined) {
      const responseType = type('GetEventsResponse');
      this.#json = JSON.stringify(toProtoJson(responseType, responseType.decode(this.raw) as protobuf.Message & Record<string, unknown>));
    }
    return this.#json;
  }
}

/** Builds a GetEventsResponse from a plain object in proto field names (the fake agent and tests use it). */
export function encodeEvent(event: Record<string, unknown>): Buffer {
  const t = type('GetEventsResponse');
  const message = t.fromObject(event);
  const error = t.verify(message);
  if (error) throw new Error(`not a GetEventsResponse: ${error}`);
  return Buffer.from(t.encode(message).finish());
}

type GetEventsCall = grpc.ClientReadableStream<Buffer>;
export type GetEventsClient = grpc.Client & { getEvents(request: GetEventsRequest, metadata?: grpc.Metadata): GetEventsCall };

let clientConstructor: grpc.ServiceClientConstructor | undefined;

/** A client of FineGuidanceSensors.GetEvents whose stream yields each response's raw bytes. */
export function getEventsClientConstructor(): grpc.ServiceClientConstructor {
  if (clientConstructor) return clientConstructor;
  const definition = protoLoader.loadSync(TETRAGON_PROTO, { keepCase: true });
  const method = (definition['tetragon.FineGuidanceSensors'] as grpc.ServiceDefinition)['GetEvents']!;
  clientConstructor = grpc.makeGenericClientConstructor(
    {
      getEvents: {
        ...method,
        path: GET_EVENTS_PATH,
        requestSerialize: (request: GetEventsRequest) => encodeGetEventsRequest(request),
        // Pass-through: the bytes are forwarded to gRPC sinks as they came.
        responseDeserialize: (bytes: Buffer) => bytes,
      },
    },
    'FineGuidanceSensors',
  );
  return clientConstructor;
}
