import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { describe, expect, it } from 'vitest';
import { PROVIDERS, ROUTE_NAMES, type RouteName } from '../contracts/routes.ts';
import type { RouteEndpoint } from '../contracts/route-endpoints.ts';
import type { UpstreamConfig } from '../contracts/runtime-config.ts';
import type { SchemaNode } from './crd-schema.ts';
import { renderCrd } from './crd-manifest.ts';
import { GENERATE_COMMAND, generatedFiles, staleness } from './generated-files.ts';
import { PROXY_CONFIG_CRD } from './proxy-config.ts';
import { BUDGET_POLICY_CRD } from './budget-policy.ts';
import { BUDGET_POLICY, CRD_GROUP, crdManifests, PROXY_CONFIG, type BedrockEndpointSpec, type DirectEndpointSpec, type UpstreamsSpec, type VertexEndpointSpec } from './index.ts';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

function committed(path: string): string | undefined {
  try {
    return readFileSync(resolve(root, path), 'utf8');
  } catch {
    return undefined;
  }
}

describe('generated CRD files', () => {
  for (const file of generatedFiles()) {
    it(`${file.path} is what the source generates`, () => {
      const problem = staleness(file.path, committed(file.path), file.content);
      expect(problem, `${problem}; run \`${GENERATE_COMMAND}\``).toBeUndefined();
    });
  }

  it('reports the first differing line of a stale file', () => {
    expect(staleness('x.yaml', 'a\nb\nc\n', 'a\nB\nc\n')).toBe('x.yaml is stale: line 2 is "b", the source now gives "B"');
    expect(staleness('x.yaml', undefined, 'a')).toBe('x.yaml is missing');
  });

  it('`generate.ts` writes every file; `--check` then fails naming a stale file and the command', () => {
    const generator = resolve(root, 'crds/generate.ts');
    const run = (args: string[]) => spawnSync(process.execPath, [generator, ...args], { encoding: 'utf8' });
    const dir = mkdtempSync(join(tmpdir(), 'crds-generate-'));
    try {
      expect(run(['--root', dir]).status).toBe(0);
      expect(run(['--check', '--root', dir])).toMatchObject({ status: 0, stderr: '' });

      const yamlPath = join(dir, 'charts/tollgate/crds/tollgate.dev_proxyconfigs.yaml');
      writeFileSync(yamlPath, readFileSync(yamlPath, 'utf8').replace('maxItems: 1000', 'maxItems: 5'));
      const stale = run(['--check', '--root', dir]);
      expect(stale.status).toBe(1);
      expect(stale.stderr).toContain('charts/tollgate/crds/tollgate.dev_proxyconfigs.yaml is stale');
      expect(stale.stderr).toContain('"maxItems: 5", the source now gives "maxItems: 1000"');
      expect(stale.stderr).toContain(`Run \`${GENERATE_COMMAND}\``);
      expect(readFileSync(yamlPath, 'utf8')).toContain('maxItems: 5'); // --check writes nothing

      expect(run(['--check', '--bogus']).stderr).toContain('unknown argument --bogus');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('crdManifests()', () => {
  it('is one YAML stream holding the ProxyConfig and BudgetPolicy CRDs, equal to the committed files', () => {
    const docs = parseAllDocuments(crdManifests()).map((d) => d.toJS());
    expect(docs).toEqual([renderCrd(PROXY_CONFIG_CRD), renderCrd(BUDGET_POLICY_CRD)]);
    const budgetYaml = committed('crds/generated/tollgate.dev_budgetpolicies.yaml')!;
    expect(crdManifests()).toBe(committed('crds/generated/tollgate.dev_proxyconfigs.yaml')! + budgetYaml.slice(budgetYaml.indexOf('---')));
    expect(docs[0].metadata.name).toBe(`${PROXY_CONFIG.plural}.${CRD_GROUP}`);
    expect(docs[1].metadata.name).toBe(`${BUDGET_POLICY.plural}.${CRD_GROUP}`);
  });

  it('names the API coordinates clients use', () => {
    expect(PROXY_CONFIG).toEqual({
      group: 'tollgate.dev',
      version: 'v1alpha1',
      apiVersion: 'tollgate.dev/v1alpha1',
      kind: 'ProxyConfig',
      listKind: 'ProxyConfigList',
      plural: 'proxyconfigs',
      singular: 'proxyconfig',
      shortName: 'pxc',
    });
  });
});

// Walks the schema; the API server refuses a CRD whose CEL rules have an unbounded estimated cost, and an
// unbounded list or string is also an easy denial of service against etcd.
function* nodes(node: SchemaNode, path: string): Generator<[string, SchemaNode]> {
  yield [path, node];
  for (const [k, v] of Object.entries(node.properties ?? {})) yield* nodes(v, `${path}.${k}`);
  if (node.items) yield* nodes(node.items, `${path}[]`);
  if (node.additionalProperties) yield* nodes(node.additionalProperties, `${path}.*`);
}

describe('ProxyConfig schema', () => {
  const schema = PROXY_CONFIG_CRD.versions[0]!.schema;
  const spec = schema.properties!.spec!;
  const status = schema.properties!.status!;

  it('bounds every list and every free-form string in spec and status', () => {
    const unbounded: string[] = [];
    for (const [path, node] of [...nodes(spec, 'spec'), ...nodes(status, 'status')]) {
      if (node.type === 'array' && node.maxItems === undefined) unbounded.push(path);
      if (node.type === 'string' && node.maxLength === undefined && !node.enum && node.format !== 'date-time') {
        unbounded.push(path);
      }
    }
    expect(unbounded).toEqual([]);
  });

  it('has a field per route and per provider, taken from the route table', () => {
    expect(Object.keys(spec.properties!.upstreams!.properties!)).toEqual([...ROUTE_NAMES]);
    expect(Object.keys(spec.properties!.cache!.properties!)).toEqual([...PROVIDERS]);
  });

  it('holds no credential values: every credential is a Secret reference', () => {
    for (const [name, ref] of Object.entries(spec.properties!.credentials!.properties!)) {
      expect(ref.type, name).toBe('object');
      expect(ref.required, name).toContain('secretName');
    }
  });
});

describe('BudgetPolicy schema', () => {
  const schema = BUDGET_POLICY_CRD.versions[0]!.schema;

  it('bounds every list and every free-form string in spec and status', () => {
    const unbounded: string[] = [];
    for (const [path, node] of [...nodes(schema.properties!.spec!, 'spec'), ...nodes(schema.properties!.status!, 'status')]) {
      if (node.type === 'array' && node.maxItems === undefined) unbounded.push(path);
      if (node.type === 'string' && node.maxLength === undefined && !node.enum && node.format !== 'date-time') unbounded.push(path);
    }
    expect(unbounded).toEqual([]);
  });

  it('keeps money out of floats: amounts are decimal strings or integer micro-dollars', () => {
    const spec = schema.properties!.spec!.properties!;
    expect([spec.limitUsd!.type, spec.limitMicroUsd!.type]).toEqual(['string', 'integer']);
    const grant = spec.grants!.items!.properties!;
    expect([grant.amountUsd!.type, grant.amountMicroUsd!.type]).toEqual(['string', 'integer']);
    for (const [path, node] of nodes(schema, 'budgetpolicy')) expect(node.type, path).not.toBe('number');
  });
});

// Compile-time (tsc checks the tests too): the operator hands spec.upstreams to the sidecar's validator as it
// is (operator/src/render.ts), so the CRD needs an upstream for every route and no other, and no field or value
// type the runtime's UpstreamConfig lacks (the validator would refuse it: a ProxyConfig the API server accepts
// and the sidecar never runs). The price entry needs no such check: contracts/ gets the CRD's own generated type.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type CrdUpstreamField = { [R in keyof UpstreamsSpec]-?: keyof NonNullable<UpstreamsSpec[R]> }[keyof UpstreamsSpec];
const everyRouteOnce: Same<keyof UpstreamsSpec, RouteName> = true;
const noUnknownField: Same<Exclude<CrdUpstreamField, keyof UpstreamConfig>, never> = true;
const valuesFit: Record<RouteName, Omit<UpstreamConfig, 'endpoints'>> = {} as Required<UpstreamsSpec>;
// An endpoint's key is a Secret reference the operator turns into files (render.ts); its other fields go as they are.
const endpointsFit: Omit<RouteEndpoint, 'credential'>[] = [] as Omit<VertexEndpointSpec | BedrockEndpointSpec | DirectEndpointSpec, 'credential'>[];
void [everyRouteOnce, noUnknownField, valuesFit, endpointsFit];
