// The ProxyConfig CRD on a real kube-apiserver: it installs and becomes Established, the documented sample is
// accepted as written (plus defaults), every kind of bad resource is refused by the API server with a message
// naming the field and leaves nothing behind, printer columns show status, and status is a subresource.

import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ApiException, CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { crdManifests, PROXY_CONFIG, type ProxyConfig, type ProxyConfigSpec } from '../../crds/index.ts';
import { startControlPlane, type ControlPlane } from '../control-plane/control-plane.ts';
import { crdEstablished } from './crd-established.ts';

const NAMESPACE = 'crd-validation';
const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const SAMPLE = parse(readFileSync(resolve(root, 'crds/samples/proxy-config.yaml'), 'utf8')) as ProxyConfig;

const coordinates = { group: PROXY_CONFIG.group, version: PROXY_CONFIG.version, plural: PROXY_CONFIG.plural };

function proxyConfig(name: string, spec: ProxyConfigSpec): ProxyConfig {
  return { apiVersion: PROXY_CONFIG.apiVersion, kind: PROXY_CONFIG.kind, metadata: { name }, spec };
}

/** The sample's spec, changed by `edit`: every refusal below differs from an accepted resource in one place. */
function sampleWith(edit: (spec: any) => void): ProxyConfigSpec {
  const spec = structuredClone(SAMPLE.spec!);
  edit(spec);
  return spec;
}

function apiError(error: unknown): { code: number; message: string; causes: { field?: string; message?: string }[] } {
  if (!(error instanceof ApiException)) throw error;
  const body = typeof error.body === 'string' ? JSON.parse(error.body) : error.body;
  return { code: error.code, message: body.message, causes: body.details?.causes ?? [] };
}

/** kubectl's table output: columns start where their header does; empty cells stay empty. */
function parseTable(stdout: string): { header: string[]; rows: Map<string, Record<string, string>> } {
  const [headerLine = '', ...lines] = stdout.trimEnd().split('\n');
  const columns = [...headerLine.matchAll(/\S+/g)].map((m) => ({ name: m[0], start: m.index }));
  const rows = new Map<string, Record<string, string>>();
  for (const line of lines) {
    const row = Object.fromEntries(columns.map((c, i) => [c.name, line.slice(c.start, columns[i + 1]?.start ?? line.length).trim()]));
    rows.set(row.NAME!, row);
  }
  return { header: columns.map((c) => c.name), rows };
}

describe('ProxyConfig CRD on a real API server', () => {
  let cp: ControlPlane;
  let objects: CustomObjectsApi;

  const get = (name: string): Promise<ProxyConfig> => objects.getNamespacedCustomObject({ ...coordinates, namespace: NAMESPACE, name });

  beforeAll(async () => {
    cp = await startControlPlane();
    objects = cp.kubeConfig.makeApiClient(CustomObjectsApi);
    await cp.kubeConfig.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: NAMESPACE } } });
    // What `tollgate crds | kubectl apply -f -` does.
    const applied = await cp.kubectl(['apply', '-f', '-'], { input: crdManifests() });
    expect(applied, applied.stderr).toMatchObject({ code: 0 });
    await crdEstablished(cp.kubeConfig, `${PROXY_CONFIG.plural}.${PROXY_CONFIG.group}`);
  });

  afterAll(async () => {
    await cp?.stop();
  });

  it('accepts the documented sample as written, adding only the schema defaults', async () => {
    const applied = await cp.kubectl(['apply', '-n', NAMESPACE, '-f', resolve(root, 'crds/samples/proxy-config.yaml')]);
    expect(applied, applied.stderr).toMatchObject({ code: 0 });
    expect(applied.stderr).not.toMatch(/warning/i);

    const stored = await get('default');
    const expected = structuredClone(SAMPLE.spec!);
    expected.credentials!.aws = {
      ...expected.credentials!.aws!,
      accessKeyIdKey: 'AWS_ACCESS_KEY_ID',
      secretAccessKeyKey: 'AWS_SECRET_ACCESS_KEY',
    };
    expect(stored.spec).toEqual(expected);
    expect(stored.spec!.pricing!.models![0]!.cached_input_per_million).toBe(0.3);
  });

  it('accepts BigQuery and Firestore span stores with their key files as Secret references', async () => {
    const storage = {
      kind: 'bigquery' as const,
      bigquery: { projectId: 'acme-prod', dataset: 'llm', table: 'spans', location: 'EU', partitionExpirationDays: 400, credentials: { secretName: 'warehouse', key: 'sa.json' } },
      firestore: { databaseId: '(default)', collection: 'spans', credentials: { secretName: 'fs-key', key: 'key.json' } },
    };
    await objects.createNamespacedCustomObject({ ...coordinates, namespace: NAMESPACE, body: proxyConfig('warehouse', { storage }) });
    expect((await get('warehouse')).spec).toEqual({ storage });
  });

  it('accepts an empty spec and defaults the storage kind', async () => {
    await objects.createNamespacedCustomObject({
      ...coordinates,
      namespace: NAMESPACE,
      body: proxyConfig('minimal', { storage: { bufferSize: 100 } }),
    });
    expect((await get('minimal')).spec).toEqual({ storage: { kind: 'sqlite', bufferSize: 100 } });
  });

  // Each case: the spec, the field the refusal must name, and what it must say about it.
  const refusals: { what: string; spec: ProxyConfigSpec; field: string; says: RegExp }[] = [
    {
      what: 'a negative price',
      spec: sampleWith((s) => (s.pricing.models[0].input_per_million = -1)),
      field: 'spec.pricing.models[0].input_per_million',
      says: /greater than or equal to 0/,
    },
    {
      what: 'an absurd price',
      spec: sampleWith((s) => (s.pricing.models[2].output_per_million = 1e9)),
      field: 'spec.pricing.models[2].output_per_million',
      says: /less than or equal to 100000/,
    },
    {
      what: 'the same provider and model twice',
      spec: sampleWith((s) => s.pricing.models.push({ ...s.pricing.models[2], input_per_million: 1 })),
      field: 'spec.pricing.models[5]',
      says: /Duplicate value.*gpt-4o/,
    },
    {
      what: 'an unknown provider',
      spec: sampleWith((s) => (s.pricing.models[0].provider = 'mistral')),
      field: 'spec.pricing.models[0].provider',
      says: /Unsupported value: "mistral".*"google", "openai", "anthropic", "local"/,
    },
    {
      what: 'a route named like a built-in route',
      spec: sampleWith((s) => (s.routes[0].name = 'beta')),
      field: 'spec.routes[0].name',
      says: /name must not be a built-in route/,
    },
    {
      what: 'two routes of one name',
      spec: sampleWith((s) => s.routes.push({ ...s.routes[0] })),
      field: 'spec.routes[1]',
      says: /Duplicate value.*mistral/,
    },
    {
      what: 'a route of an unknown format',
      spec: sampleWith((s) => (s.routes[0].format = 'cohere')),
      field: 'spec.routes[0].format',
      says: /Unsupported value: "cohere"/,
    },
    {
      what: 'a route credential of an unknown kind',
      spec: sampleWith((s) => (s.routes[0].credential.kind = 'oauth')),
      field: 'spec.routes[0].credential.kind',
      says: /Unsupported value: "oauth"/,
    },
    {
      what: 'a route credential with a setting of another kind',
      spec: sampleWith((s) => (s.routes[0].credential.service = 'bedrock')),
      field: 'spec.routes[0].credential',
      says: /credential kind api-key takes only header, prefix, apiKey/,
    },
    {
      what: 'a route whose base URL is not http(s)',
      spec: sampleWith((s) => (s.routes[0].baseUrl = 'ftp://files.example')),
      field: 'spec.routes[0].baseUrl',
      says: /must be an absolute http or https URL/,
    },
    {
      what: 'a price entry without an output price',
      spec: sampleWith((s) => delete s.pricing.models[3].output_per_million),
      field: 'spec.pricing.models[3].output_per_million',
      says: /Required value/,
    },
    {
      what: 'an alias equal to the model id',
      spec: sampleWith((s) => s.pricing.models[0].aliases.push('claude-sonnet-4')),
      field: 'spec.pricing.models[0].aliases',
      says: /aliases must not repeat the model id/,
    },
    {
      what: 'a model id with spaces',
      spec: sampleWith((s) => (s.pricing.models[2].model = 'gpt 4o')),
      field: 'spec.pricing.models[2].model',
      says: /should match/,
    },
    {
      what: 'more price entries than allowed',
      spec: {
        pricing: {
          models: Array.from({ length: 1001 }, (_, i) => ({
            provider: 'local' as const,
            model: `m-${i}`,
            input_per_million: 0,
            output_per_million: 0,
          })),
        },
      },
      field: 'spec.pricing.models',
      says: /Too many: 1001: must have at most 1000 items/,
    },
    {
      what: 'more aliases than allowed',
      spec: sampleWith((s) => (s.pricing.models[1].aliases = Array.from({ length: 17 }, (_, i) => `gemini-alias-${i}`))),
      field: 'spec.pricing.models[1].aliases',
      says: /Too many: 17: must have at most 16 items/,
    },
    {
      what: 'a base URL with another scheme',
      spec: sampleWith((s) => (s.upstreams.beta.baseUrl = 'ftp://api.openai.com')),
      field: 'spec.upstreams.beta.baseUrl',
      says: /must be an absolute http or https URL/,
    },
    {
      what: 'a base URL that is not a URL',
      spec: sampleWith((s) => (s.upstreams['gamma-direct'].baseUrl = 'api.anthropic.com')),
      field: 'spec.upstreams.gamma-direct.baseUrl',
      says: /must be an absolute http or https URL/,
    },
    {
      what: 'a base URL with a query',
      spec: sampleWith((s) => (s.upstreams.alpha.baseUrl = 'https://vertex.example.com/v1?key=x')),
      field: 'spec.upstreams.alpha.baseUrl',
      says: /without query, fragment/,
    },
    {
      what: 'a base URL carrying user:password@',
      spec: sampleWith((s) => (s.upstreams.beta.baseUrl = 'https://user:secret@proxy.example.com/openai')),
      field: 'spec.upstreams.beta.baseUrl',
      says: /user:password@/,
    },
    {
      what: 'an OTLP endpoint carrying credentials',
      spec: sampleWith((s) => (s.tracing = { otlp: { endpoint: 'https://user:secret@collector.example:4318' } })),
      field: 'spec.tracing.otlp.endpoint',
      says: /should match/,
    },
    {
      what: 'an OTLP batch larger than its queue',
      spec: sampleWith((s) => (s.tracing = { otlp: { endpoint: 'http://collector:4318', maxQueueSize: 10, maxExportBatchSize: 100 } })),
      field: 'spec.tracing.otlp.maxExportBatchSize',
      says: /maxExportBatchSize must not exceed maxQueueSize/,
    },
    {
      what: 'per-user metrics for more users than the cap allows',
      spec: sampleWith((s) => (s.metrics = { perUser: { enabled: true, maxUsers: 1_000_000 } })),
      field: 'spec.metrics.perUser.maxUsers',
      says: /less than or equal to 10000/,
    },
    {
      what: 'a gateway route that cannot serve the provider',
      spec: sampleWith((s) => (s.gateway = { anthropicRoute: 'beta' })),
      field: 'spec.gateway.anthropicRoute',
      says: /Unsupported value: "beta"/,
    },
    {
      what: 'a timeout below the minimum',
      spec: sampleWith((s) => (s.upstreams.beta.timeoutMs = 5)),
      field: 'spec.upstreams.beta.timeoutMs',
      says: /greater than or equal to 100/,
    },
    {
      what: 'a breaker failure ratio above 1',
      spec: sampleWith((s) => (s.breaker.failureRatio = 1.5)),
      field: 'spec.breaker.failureRatio',
      says: /less than or equal to 1/,
    },
    {
      what: 'a breaker failure ratio of 0',
      spec: sampleWith((s) => (s.breaker.failureRatio = 0)),
      field: 'spec.breaker.failureRatio',
      says: /greater than 0/,
    },
    {
      what: 'a fractional consecutive-failure count',
      spec: sampleWith((s) => (s.breaker.consecutiveFailures = 2.5)),
      field: 'spec.breaker.consecutiveFailures',
      says: /must be of type integer/,
    },
    {
      what: 'a cached multiplier above 1',
      spec: sampleWith((s) => (s.cache.openai.cached_multiplier = 2)),
      field: 'spec.cache.openai.cached_multiplier',
      says: /less than or equal to 1/,
    },
    {
      what: 'a credential value instead of a Secret reference',
      spec: sampleWith((s) => (s.credentials.openaiApiKey = 'sk-proj-0123456789abcdef')),
      field: 'spec.credentials.openaiApiKey',
      says: /must be of type object/,
    },
    {
      what: 'a Secret reference without a key',
      spec: sampleWith((s) => delete s.credentials.anthropicApiKey.key),
      field: 'spec.credentials.anthropicApiKey.key',
      says: /Required value/,
    },
    {
      what: 'a Secret name that is not a Kubernetes name',
      spec: sampleWith((s) => (s.credentials.aws.secretName = 'Bedrock Keys')),
      field: 'spec.credentials.aws.secretName',
      says: /should match/,
    },
    {
      what: 'an unknown storage kind',
      spec: sampleWith((s) => (s.storage.kind = 'postgres')),
      field: 'spec.storage.kind',
      says: /Unsupported value: "postgres"/,
    },
    {
      what: 'DuckDB, which the sidecar image does not carry',
      spec: sampleWith((s) => (s.storage.kind = 'duckdb')),
      field: 'spec.storage.kind',
      says: /Unsupported value: "duckdb".*"sqlite", "memory", "bigquery", "firestore"/,
    },
    {
      what: 'a BigQuery dataset name with a dash',
      spec: sampleWith((s) => (s.storage = { kind: 'bigquery', bigquery: { dataset: 'llm-spend' } })),
      field: 'spec.storage.bigquery.dataset',
      says: /should match/,
    },
    {
      what: 'a BigQuery key file given as a value instead of a Secret reference',
      spec: sampleWith((s) => (s.storage = { kind: 'bigquery', bigquery: { credentials: '{"type":"service_account"}' } })),
      field: 'spec.storage.bigquery.credentials',
      says: /must be of type object/,
    },
    {
      what: 'a model alias target with a weight of 0',
      spec: sampleWith((s) => (s.models['claude-sonnet'].targets[1].weight = 0)),
      field: 'spec.models.claude-sonnet.targets[1].weight',
      says: /should be greater than 0/,
    },
    {
      what: 'a model alias without targets',
      spec: sampleWith((s) => (s.models['claude-sonnet'].targets = [])),
      field: 'spec.models.claude-sonnet.targets',
      says: /should have at least 1 items/,
    },
    {
      what: 'a model alias target without its model',
      spec: sampleWith((s) => delete s.models['claude-sonnet'].targets[0].model),
      field: 'spec.models.claude-sonnet.targets[0].model',
      says: /Required value/,
    },
    {
      what: 'a failure a model alias cannot fall back on',
      spec: sampleWith((s) => (s.models['claude-sonnet'].fallbackOn = ['bad_request'])),
      field: 'spec.models.claude-sonnet.fallbackOn[0]',
      says: /Unsupported value: "bad_request"/,
    },
    {
      what: 'a batch larger than the buffer',
      spec: sampleWith((s) => Object.assign(s.storage, { bufferSize: 100, batchSize: 101 })),
      field: 'spec.storage.batchSize',
      says: /batchSize must not exceed bufferSize/,
    },
  ];

  for (const [i, c] of refusals.entries()) {
    it(`refuses ${c.what}, naming ${c.field}`, async () => {
      const name = `refused-${i}`;
      const result = await cp.kubectl(['apply', '-n', NAMESPACE, '-f', '-'], {
        input: JSON.stringify(proxyConfig(name, c.spec)),
      });
      expect(result.code).not.toBe(0);
      expect(result.stderr).toContain(`${c.field}:`);
      const forField = result.stderr.slice(result.stderr.indexOf(`${c.field}:`));
      expect(forField).toMatch(c.says);
      const lookup = await cp.kubectl(['get', 'pxc', name, '-n', NAMESPACE]);
      expect(lookup.stderr).toContain('NotFound');
    });
  }

  // kubectl asks for strict field validation, so a field the schema lacks is an error, not silently dropped.
  const unknownFields: { what: string; spec: ProxyConfigSpec; field: string }[] = [
    {
      what: 'a region on a Vertex AI route',
      spec: sampleWith((s) => (s.upstreams.alpha.region = 'us-east-1')),
      field: 'spec.upstreams.alpha.region',
    },
    {
      what: 'an unknown route',
      spec: sampleWith((s) => (s.upstreams.delta = { timeoutMs: 1000 })),
      field: 'spec.upstreams.delta',
    },
    {
      what: "a key's value in a route's credential",
      spec: sampleWith((s) => (s.routes[0].credential.value = 'sk-mistral-0123456789')),
      field: 'spec.routes[0].credential.value',
    },
    {
      what: 'a credential value beside a Secret reference',
      spec: sampleWith((s) => (s.credentials.openaiApiKey.value = 'sk-proj-0123456789abcdef')),
      field: 'spec.credentials.openaiApiKey.value',
    },
  ];

  for (const c of unknownFields) {
    it(`refuses ${c.what} as an unknown field`, async () => {
      const result = await cp.kubectl(['apply', '-n', NAMESPACE, '-f', '-'], {
        input: JSON.stringify(proxyConfig('unknown-field', c.spec)),
      });
      expect(result.code).not.toBe(0);
      expect(result.stderr).toContain(`unknown field "${c.field}"`);
      expect((await cp.kubectl(['get', 'pxc', 'unknown-field', '-n', NAMESPACE])).stderr).toContain('NotFound');
    });
  }

  it('reports every violation of one resource, with its field, to API clients', async () => {
    const spec = sampleWith((s) => {
      s.pricing.models[0].input_per_million = -1;
      s.upstreams.beta.baseUrl = 'ftp://x';
    });
    const error = await objects.createNamespacedCustomObject({ ...coordinates, namespace: NAMESPACE, body: proxyConfig('api-refused', spec) }).then(() => undefined, apiError);
    expect(error?.code).toBe(422);
    expect(error?.causes.map((c) => c.field).sort()).toEqual(['spec.pricing.models[0].input_per_million', 'spec.upstreams.beta.baseUrl']);
  });

  it('refuses a bad update and keeps the stored resource as it was', async () => {
    const before = await get('default');
    const result = await cp.kubectl(['apply', '-n', NAMESPACE, '-f', '-'], {
      input: JSON.stringify(
        proxyConfig(
          'default',
          sampleWith((s) => (s.breaker.failureRatio = 7)),
        ),
      ),
    });
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('spec.breaker.failureRatio');
    const after = await get('default');
    expect(after.metadata!.resourceVersion).toBe(before.metadata!.resourceVersion);
    expect(after.spec!.breaker!.failureRatio).toBe(0.5);
  });

  it('keeps status apart from spec: status is written only through the status subresource', async () => {
    const current = await get('default');
    const generation = current.metadata!.generation;
    const status = {
      observedGeneration: generation,
      configVersion: 'v7',
      sidecars: { connected: 3, current: 2 },
      conditions: [
        {
          type: 'Ready',
          status: 'True' as const,
          reason: 'Pushed',
          message: 'rendered and pushed to 3 sidecars',
          lastTransitionTime: '2026-01-01T00:00:00Z',
          observedGeneration: generation,
        },
      ],
    };

    // Through the main resource the status is dropped (and the generation does not move).
    await objects.replaceNamespacedCustomObject({
      ...coordinates,
      namespace: NAMESPACE,
      name: 'default',
      body: { ...current, status },
    });
    const viaMain = await get('default');
    expect(viaMain.status).toBeUndefined();
    expect(viaMain.metadata!.generation).toBe(generation);

    // Through /status it is kept, the spec is untouched and the generation still does not move.
    await objects.replaceNamespacedCustomObjectStatus({
      ...coordinates,
      namespace: NAMESPACE,
      name: 'default',
      body: { ...viaMain, status, spec: { storage: { kind: 'memory' } } },
    });
    const viaStatus = await get('default');
    expect(viaStatus.status).toEqual(status);
    expect(viaStatus.spec).toEqual(viaMain.spec);
    expect(viaStatus.metadata!.generation).toBe(generation);

    // A status the schema forbids is refused too, so an operator bug cannot store nonsense.
    const bad = await objects
      .replaceNamespacedCustomObjectStatus({
        ...coordinates,
        namespace: NAMESPACE,
        name: 'default',
        body: { ...viaStatus, status: { ...status, conditions: [{ ...status.conditions[0], status: 'Maybe' }] } },
      })
      .then(() => undefined, apiError);
    expect(bad?.code).toBe(422);
    expect(bad?.causes).toContainEqual(expect.objectContaining({ field: 'status.conditions[0].status' }));
  });

  it('shows Ready and the sidecar count in `kubectl get pxc`', async () => {
    const table = await cp.kubectl(['get', 'pxc', '-n', NAMESPACE]);
    expect(table, table.stderr).toMatchObject({ code: 0 });
    const { header, rows } = parseTable(table.stdout);
    expect(header).toEqual(['NAME', 'READY', 'SIDECARS', 'AGE']);
    expect(rows.get('default')).toMatchObject({ READY: 'True', SIDECARS: '3' });
    // One the operator has not reached yet shows empty columns rather than an error.
    expect(rows.get('minimal')).toMatchObject({ READY: '', SIDECARS: '' });

    const wide = await cp.kubectl(['get', 'proxyconfigs.tollgate.dev', '-n', NAMESPACE, '-o', 'wide']);
    const wideTable = parseTable(wide.stdout);
    expect(wideTable.header).toEqual(['NAME', 'READY', 'SIDECARS', 'CURRENT', 'REASON', 'AGE']);
    expect(wideTable.rows.get('default')).toMatchObject({ READY: 'True', SIDECARS: '3', CURRENT: '2', REASON: 'Pushed' });
  });
});
