// The config validator for the sections defined once in runtime-config-schema.ts: it reads the same schema
// nodes the CRD is built from (types, bounds, enums, patterns, unknown keys, cross-field relations), so the
// file, the config API and an operator snapshot are held to exactly what the API server holds a ProxyConfig to
// (ADR 0602). Every error names its field, in the words the hand-written parsers of the other sections use.

import { ConfigError } from './config-error.ts';
import { isRecord } from './json-record.ts';
import type { SchemaNode } from './schema-node.ts';

/** A property checked by its own parser instead of its node (a URL whose refusals need precise words). */
export type PropertyParser = (value: unknown, field: string) => unknown;

function numberValue(node: SchemaNode, value: unknown, field: string): number {
  const integer = node.type === 'integer';
  const min = node.minimum ?? -Number.MAX_VALUE;
  const max = node.maximum ?? Number.MAX_VALUE;
  const ok = typeof value === 'number' && Number.isFinite(value) && (!integer || Number.isInteger(value)) && (node.exclusiveMinimum ? value > min : value >= min) && value <= max;
  if (!ok) {
    const lower = node.exclusiveMinimum ? `greater than ${min}` : `at least ${min}`;
    throw new ConfigError(field, `must be ${integer ? 'an integer' : 'a number'} ${lower} and at most ${max} (got ${JSON.stringify(value)})`);
  }
  return value;
}

function stringValue(node: SchemaNode, value: unknown, field: string): string {
  if (node.enum !== undefined) {
    if (typeof value !== 'string' || !node.enum.includes(value)) throw new ConfigError(field, `must be one of ${node.enum.join(', ')} (got ${JSON.stringify(value)})`);
    return value;
  }
  if (typeof value !== 'string' || value.length === 0) throw new ConfigError(field, 'must be a non-empty string');
  if (node.maxLength !== undefined && value.length > node.maxLength) throw new ConfigError(field, `must be at most ${node.maxLength} characters`);
  if (node.pattern !== undefined && !new RegExp(node.pattern).test(value)) throw new ConfigError(field, node.hint ?? `must match ${node.pattern}`);
  return value;
}

function arrayValue(node: SchemaNode, value: unknown, field: string): unknown[] {
  if (!Array.isArray(value)) throw new ConfigError(field, 'must be a list');
  if (node.maxItems !== undefined && value.length > node.maxItems) throw new ConfigError(field, `must have at most ${node.maxItems} entries`);
  return value.map((item, i) => validateValue(node.items!, item, `${field}[${i}]`));
}

function objectValue(node: SchemaNode, value: unknown, field: string, parsers: Readonly<Record<string, PropertyParser>>): Record<string, unknown> {
  if (!isRecord(value)) throw new ConfigError(field, 'must be an object');
  const properties = node.properties ?? {};
  const known = Object.keys(properties);
  for (const key of Object.keys(value)) {
    if (!known.includes(key)) throw new ConfigError(`${field}.${key}`, `is not a known field (expected one of: ${known.join(', ')})`);
  }
  for (const key of node.required ?? []) if (value[key] === undefined) throw new ConfigError(`${field}.${key}`, 'is required');
  const out: Record<string, unknown> = {};
  for (const [key, child] of Object.entries(properties)) {
    const v = value[key];
    if (v === undefined) continue;
    const parser = parsers[key];
    out[key] = parser ? parser(v, `${field}.${key}`) : validateValue(child, v, `${field}.${key}`);
  }
  for (const { field: a, notGreaterThan: b } of node.relations ?? []) {
    const [x, y] = [out[a], out[b]];
    if (typeof x === 'number' && typeof y === 'number' && x > y) throw new ConfigError(`${field}.${a}`, `must not exceed ${b} (${y})`);
  }
  return out;
}

function validateValue(node: SchemaNode, value: unknown, field: string): unknown {
  switch (node.type) {
    case 'integer':
    case 'number':
      return numberValue(node, value, field);
    case 'string':
      return stringValue(node, value, field);
    case 'boolean':
      if (typeof value !== 'boolean') throw new ConfigError(field, `must be true or false (got ${JSON.stringify(value)})`);
      return value;
    case 'array':
      return arrayValue(node, value, field);
    case 'object':
      return objectValue(node, value, field, {});
  }
}

/**
 * Checks one section against its schema node; throws ConfigError naming the first bad field, returns a clean
 * copy holding only the fields that were set. `parsers` replace the node's check for some properties.
 */
export function validateSection<T>(node: SchemaNode, input: unknown, field: string, parsers: Readonly<Record<string, PropertyParser>> = {}): T {
  return objectValue(node, input, field, parsers) as T;
}
