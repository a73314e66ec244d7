// Walks the ProxyConfig CRD's schema against the runtime config validator (ADR 0602): for every field a
// ProxyConfig hands the sidecar, the validator of the file and the config API must accept what the API server
// accepts and refuse what it refuses, naming the same field: the same keys, the same bounds, the same enums, the
// same cross-field rules. A bound changed on one side only, a field one side lacks, a rule only the CRD's CEL
// checks: each fails here with its path.

import { describe, expect, it } from 'vitest';
import { parseRuntimeConfigPatch } from '../contracts/config-schema.ts';
import type { SchemaNode } from './crd-schema.ts';
import { PROXY_CONFIG_CRD } from './proxy-config.ts';

const spec = PROXY_CONFIG_CRD.versions[0]!.schema.properties!.spec!;

/**
 * Sections, or fields, the operator rewrites before the validator sees them, so they cannot be compared
 * one to one: Secret references become files, a route's prices become price entries, audit sinks are rendered
 * (render-audit.ts), and the bypass enforcement fields stay with the operator (ADR 1602). Everything else is walked.
 */
const NOT_HANDED_AS_IS = new Set([
  'credentials',
  'audit',
  'routes',
  'pricing',
  'storage.bigquery.credentials',
  'storage.firestore.credentials',
  'provenance.enforcement',
  'provenance.enforcementAction',
]);

/** Keys the engine's own config has beside the CRD's, because the CRD's sidecars cannot use them. */
const RUNTIME_ONLY: Readonly<Record<string, readonly string[]>> = {
  // a SQLite file path and DuckDB are the local proxy's; a sidecar keeps its spans in its state volume
  storage: ['path', 'duckdb'],
  // a key file's path, where the CRD has the Secret reference the operator turns into it
  'storage.bigquery': ['credentialsFile'],
  'storage.firestore': ['credentialsFile'],
};

/** A patch holding `value` at `path` (`breaker.openMs`), with `extra` beside it in the same object. */
function patchAt(path: readonly string[], value: unknown, extra: Record<string, unknown> = {}): Record<string, unknown> {
  let out: Record<string, unknown> = { ...extra, [path.at(-1)!]: value };
  for (const key of path.slice(0, -1).reverse()) out = { [key]: out };
  return out;
}

function refuses(patch: unknown): string | null {
  try {
    parseRuntimeConfigPatch(patch);
    return null;
  } catch (error) {
    return (error as Error).message;
  }
}

interface Leaf {
  path: string[];
  node: SchemaNode;
}

function walk(node: SchemaNode, path: string[], out: Leaf[], objects: Leaf[]): void {
  if (NOT_HANDED_AS_IS.has(path.join('.'))) return;
  if (node.type === 'object' && node.properties) {
    objects.push({ path, node });
    for (const [key, child] of Object.entries(node.properties)) walk(child, [...path, key], out, objects);
    return;
  }
  out.push({ path, node });
}

const leaves: Leaf[] = [];
const objects: Leaf[] = [];
walk(spec, [], leaves, objects);

describe('every bounded number: the validator takes the CRD’s bounds and refuses one step past them, naming the field', () => {
  for (const { path, node } of leaves.filter((leaf) => leaf.node.type === 'integer' || leaf.node.type === 'number')) {
    it(path.join('.'), () => {
      const field = path.join('.');
      const step = node.type === 'integer' ? 1 : 0.001;
      expect(node.minimum, `${field} has a minimum`).toBeDefined();
      expect(node.maximum, `${field} has a maximum`).toBeDefined();
      const low = node.exclusiveMinimum ? node.minimum! + step : node.minimum!;
      expect(refuses(patchAt(path, low)), `${field} = ${low}`).toBeNull();
      expect(refuses(patchAt(path, node.maximum!)), `${field} = ${node.maximum}`).toBeNull();
      expect(refuses(patchAt(path, node.exclusiveMinimum ? node.minimum! : node.minimum! - step)), `${field} below its minimum`).toMatch(
        new RegExp(`^${field.replaceAll('.', '\\.')} `),
      );
      expect(refuses(patchAt(path, node.maximum! + step)), `${field} above its maximum`).toMatch(new RegExp(`^${field.replaceAll('.', '\\.')} `));
    });
  }
});

describe('every enum: the validator takes each value the CRD allows and refuses another', () => {
  for (const { path, node } of leaves.filter((leaf) => leaf.node.enum !== undefined)) {
    it(path.join('.'), () => {
      for (const value of node.enum!) expect(refuses(patchAt(path, value)), `${path.join('.')} = ${String(value)}`).toBeNull();
      expect(refuses(patchAt(path, 'not-a-value'))).toMatch(new RegExp(`^${path.join('\\.')} `));
    });
  }
});

describe('every object: the validator knows the CRD’s keys and refuses one it does not know', () => {
  for (const { path, node } of objects.filter((object) => object.path.length > 0)) {
    it(path.join('.'), () => {
      const message = refuses(patchAt(path, { 'no-such-field': 1 })) ?? '';
      expect(message).toMatch(new RegExp(`^${path.join('\\.')}\\.no-such-field is not a (known field|route)`));
      // The keys the validator names as known are the CRD's (plus the engine's own, listed above).
      const named = /\(expected (?:one of: )?([^)]*)\)/.exec(message)?.[1]?.split(/, | or /);
      const crdKeys = Object.keys(node.properties!).filter((key) => !NOT_HANDED_AS_IS.has([...path, key].join('.')));
      expect(named?.sort(), `${path.join('.')}: the keys the validator knows`).toEqual([...crdKeys, ...(RUNTIME_ONLY[path.join('.')] ?? [])].sort());
      const keys = Object.keys(node.properties!).filter((key) => !NOT_HANDED_AS_IS.has([...path, key].join('.')));
      for (const key of keys) {
        const message = refuses(patchAt([...path, key], undefined));
        expect(message ?? '', `${path.join('.')}.${key}`).not.toMatch(/is not a known field/);
      }
    });
  }
});

describe('every cross-field rule of the CRD is a rule of the validator too', () => {
  const rules = objects.flatMap(({ path, node }) => (node.relations ?? []).map((relation) => ({ path, node, relation })));

  it('has the rules it is meant to have (batchSize <= bufferSize among them)', () => {
    expect(rules.map(({ path, relation }) => `${path.join('.')}: ${relation.field} <= ${relation.notGreaterThan}`)).toEqual([
      'storage: batchSize <= bufferSize',
      'tracing.otlp: maxExportBatchSize <= maxQueueSize',
    ]);
    // Every CEL comparison rule of these objects comes from a relation: none is checked by the API server alone.
    for (const { node } of objects) {
      const cel = (node['x-kubernetes-validations'] ?? []).filter((rule) => / <= /.test(rule.rule));
      expect(cel.length).toBe(node.relations?.length ?? 0);
    }
  });

  for (const { path, node, relation } of rules) {
    it(`${path.join('.')}.${relation.field} <= ${relation.notGreaterThan}`, () => {
      const big = node.properties![relation.field]!.minimum! + 10;
      const small = big - 1;
      const violating = patchAt([...path, relation.field], big, { [relation.notGreaterThan]: small });
      expect(refuses(violating)).toBe(`${[...path, relation.field].join('.')} must not exceed ${relation.notGreaterThan} (${small})`);
      expect(refuses(patchAt([...path, relation.field], small, { [relation.notGreaterThan]: small }))).toBeNull();
      const cel = node['x-kubernetes-validations']!.find((rule) => rule.fieldPath === `.${relation.field}`);
      expect(cel?.rule).toBe(`!has(self.${relation.field}) || !has(self.${relation.notGreaterThan}) || self.${relation.field} <= self.${relation.notGreaterThan}`);
    });
  }
});
