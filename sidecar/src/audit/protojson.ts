// Protobuf messages → the JSON that Go's protojson writes with proto field names (UseProtoNames), which is what
// Tetragon's own JSON export and `tetra getevents -o json` print: snake_case keys, fields at their default
// value left out, 64-bit integers as strings, bytes as base64, enums by name, Timestamp as RFC 3339 and the
// wrapper types as their bare value. Existing SIEM parsers of Tetragon's JSON then read our lines unchanged.

import protobuf from 'protobufjs';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

const LONG_TYPES = new Set(['int64', 'uint64', 'sint64', 'fixed64', 'sfixed64']);
const WRAPPERS = new Set([
  '.google.protobuf.DoubleValue',
  '.google.protobuf.FloatValue',
  '.google.protobuf.Int64Value',
  '.google.protobuf.UInt64Value',
  '.google.protobuf.Int32Value',
  '.google.protobuf.UInt32Value',
  '.google.protobuf.BoolValue',
  '.google.protobuf.StringValue',
  '.google.protobuf.BytesValue',
]);

/** RFC 3339 in UTC with 0, 3, 6 or 9 fractional digits, as protojson prints a Timestamp. */
export function timestampToRfc3339(seconds: number, nanos: number): string {
  const base = new Date(seconds * 1000).toISOString().slice(0, 19);
  if (!nanos) return `${base}Z`;
  let fraction = String(nanos).padStart(9, '0');
  if (fraction.endsWith('000000')) fraction = fraction.slice(0, 3);
  else if (fraction.endsWith('000')) fraction = fraction.slice(0, 6);
  return `${base}.${fraction}Z`;
}

function toNumber(value: unknown): number {
  return typeof value === 'number' ? value : Number(String(value));
}

function scalar(field: protobuf.Field, value: unknown): Json {
  if (field.resolvedType instanceof protobuf.Enum) {
    const name = field.resolvedType.valuesById[value as number];
    return name ?? (value as number);
  }
  if (LONG_TYPES.has(field.type)) return String(value);
  if (field.type === 'bytes') return Buffer.from(value as Uint8Array).toString('base64');
  if (field.type === 'double' || field.type === 'float') {
    const n = value as number;
    return Number.isFinite(n) ? n : String(n);
  }
  return value as Json;
}

function isDefault(field: protobuf.Field, value: unknown): boolean {
  if (field.resolvedType instanceof protobuf.Type) return false; // presence is what counts for messages
  if (LONG_TYPES.has(field.type)) return String(value) === '0';
  if (field.type === 'bytes') return (value as Uint8Array).length === 0;
  return value === 0 || value === false || value === '';
}

function messageValue(type: protobuf.Type, message: Record<string, unknown>): Json {
  const fullName = type.fullName;
  if (fullName === '.google.protobuf.Timestamp') {
    return timestampToRfc3339(toNumber(message.seconds ?? 0), toNumber(message.nanos ?? 0));
  }
  if (WRAPPERS.has(fullName)) {
    const field = type.fields.value!;
    return scalar(field, message.value ?? field.typeDefault);
  }
  return toProtoJson(type, message);
}

function fieldValue(field: protobuf.Field, value: unknown): Json {
  return field.resolvedType instanceof protobuf.Type ? messageValue(field.resolvedType, value as Record<string, unknown>) : scalar(field, value);
}

/**
 * Converts a decoded message (protobufjs, keepCase) to protojson. Only fields present on the message are
 * written; proto3 scalars at their zero value are left out as protojson does, oneof members always kept.
 */
export function toProtoJson(type: protobuf.Type, message: Record<string, unknown>): { [key: string]: Json } {
  const out: { [key: string]: Json } = {};
  for (const field of type.fieldsArray) {
    if (!Object.hasOwn(message, field.name)) continue;
    const value = message[field.name];
    if (value === undefined || value === null) continue;
    field.resolve();
    if (field instanceof protobuf.MapField) {
      const entries = Object.entries(value as Record<string, unknown>);
      if (entries.length === 0) continue;
      const map: { [key: string]: Json } = {};
      for (const [k, v] of entries) map[k] = fieldValue(field, v);
      out[field.name] = map;
    } else if (field.repeated) {
      const list = value as unknown[];
      if (list.length === 0) continue;
      out[field.name] = list.map((v) => fieldValue(field, v));
    } else {
      if (!field.partOf && isDefault(field, value)) continue;
      out[field.name] = fieldValue(field, value);
    }
  }
  return out;
}
