// Several endpoints for one route (ADR 0008): two keys of one provider, one project in three Vertex AI regions.
// A route's `endpoints` share its calls by weight or by least outstanding calls, each with its own breaker and
// cool-down in the engine (sidecar/src/upstream/). An endpoint takes the route's settings it does not name (base
// URL, project, location, region, credential); its own `credential` names only where its secret is, in the
// key-source fields of the route's credential kind, never another kind, header or signing service.

import { CREDENTIAL_KINDS, type CredentialDefinition, type CredentialKindName } from './credential-kinds.ts';
import { ConfigError } from './config-error.ts';
import { isRecord } from './json-record.ts';
import type { UpstreamShape } from './routes.ts';

/** How a route with endpoints picks one for a call: smooth weighted round robin, or the fewest calls in flight per weight. */
export const ENDPOINT_STRATEGIES = ['weighted', 'least-outstanding'] as const;
export type EndpointStrategy = (typeof ENDPOINT_STRATEGIES)[number];

export const MAX_ENDPOINTS = 16;
export const MAX_ENDPOINT_WEIGHT = 1000;
/** An endpoint's name: a DNS label, so it fits a metric label, a log field and a snapshot credential name. */
const ENDPOINT_NAME = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

/** Where one endpoint's secret is: the key-source fields of its route's credential kind (endpointKeySources). */
export interface EndpointCredential {
  /** api-key: the environment variable holding the key. */
  env?: string;
  /** api-key: the file holding the key; google-adc: a service account key or external_account file. */
  file?: string;
  /** aws-sigv4: files of a static key pair (and session token). */
  accessKeyIdFile?: string;
  secretAccessKeyFile?: string;
  sessionTokenFile?: string;
}

export interface RouteEndpoint {
  /** Unique within the route; names the endpoint in logs, metrics and the health view. */
  name: string;
  /** Its share of the calls (default 1). */
  weight?: number;
  /** Each of these, when absent, is the route's. */
  baseUrl?: string;
  project?: string;
  location?: string;
  region?: string;
  credential?: EndpointCredential;
}

/** The fields of a kind's definition that say where its secret is; an endpoint's own credential sets only these. */
export function endpointKeySources(kind: CredentialKindName): readonly string[] {
  const files = Object.values(CREDENTIAL_KINDS[kind].secrets);
  return kind === 'api-key' ? ['env', ...files] : files;
}

/** The route's credential with its key sources replaced by the endpoint's own, when the endpoint names any. */
export function endpointCredentialDefinition(route: CredentialDefinition, own: EndpointCredential | undefined): CredentialDefinition {
  if (own === undefined) return route;
  const definition: Record<string, unknown> = { ...route };
  for (const key of endpointKeySources(route.kind)) delete definition[key];
  return { ...definition, ...own } as unknown as CredentialDefinition;
}

interface EndpointContext {
  shape: UpstreamShape;
  /** The kind of the route's credential: the only one whose key sources an endpoint may name. */
  credentialKind: CredentialKindName;
  /** Input from the config API, which has no authentication: an endpoint there names no secret (ADR 1007). */
  fromApi: boolean;
  /** Checks an endpoint's base URL, project, location and region as the route's own are checked. */
  settings(value: Record<string, unknown>, field: string): Pick<RouteEndpoint, 'baseUrl' | 'project' | 'location' | 'region'>;
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;

export function parseEndpoints(input: unknown, field: string, ctx: EndpointContext): RouteEndpoint[] {
  if (!Array.isArray(input) || input.length === 0 || input.length > MAX_ENDPOINTS) {
    throw new ConfigError(field, `must be a list of 1 to ${MAX_ENDPOINTS} endpoints ({name, weight?, baseUrl?, …})`);
  }
  const seen = new Map<string, number>();
  return input.map((entry, i) => {
    const endpoint = parseEndpoint(entry, `${field}[${i}]`, ctx);
    const first = seen.get(endpoint.name);
    if (first !== undefined) throw new ConfigError(`${field}[${i}].name`, `repeats endpoint ${endpoint.name} (already at ${field}[${first}])`);
    seen.set(endpoint.name, i);
    return endpoint;
  });
}

function endpointFields(shape: UpstreamShape): string[] {
  return ['name', 'weight', 'baseUrl', ...(shape === 'vertex' ? ['project', 'location'] : shape === 'aws' ? ['region'] : []), 'credential'];
}

function parseEndpoint(input: unknown, field: string, ctx: EndpointContext): RouteEndpoint {
  if (!isRecord(input)) throw new ConfigError(field, 'must be an object');
  const allowed = endpointFields(ctx.shape);
  for (const key of Object.keys(input)) {
    if (!allowed.includes(key)) throw new ConfigError(`${field}.${key}`, `is not a known field (expected one of: ${allowed.join(', ')})`);
  }
  const { name, weight, credential, ...settings } = input;
  if (typeof name !== 'string' || !ENDPOINT_NAME.test(name)) {
    throw new ConfigError(`${field}.name`, `must be an endpoint name: lower-case letters, digits and '-', at most 63 (got ${JSON.stringify(name)})`);
  }
  if (weight !== undefined && !(typeof weight === 'number' && Number.isFinite(weight) && weight > 0 && weight <= MAX_ENDPOINT_WEIGHT)) {
    throw new ConfigError(`${field}.weight`, `must be a number greater than 0 and at most ${MAX_ENDPOINT_WEIGHT} (got ${JSON.stringify(weight)})`);
  }
  const endpoint: RouteEndpoint = { name, ...ctx.settings(settings, field) };
  if (weight !== undefined) endpoint.weight = weight;
  if (credential !== undefined) endpoint.credential = parseEndpointCredential(credential, `${field}.credential`, ctx);
  return endpoint;
}

function parseEndpointCredential(input: unknown, field: string, ctx: EndpointContext): EndpointCredential {
  if (ctx.fromApi) {
    throw new ConfigError(field, "cannot be set through this API, which has no authentication: an endpoint added here uses its route's credential");
  }
  if (!isRecord(input)) throw new ConfigError(field, 'must be an object');
  const sources = endpointKeySources(ctx.credentialKind);
  if (sources.length === 0) throw new ConfigError(field, `cannot be set: the route's credential is of kind ${ctx.credentialKind}, which takes no key`);
  const keys = Object.keys(input);
  for (const key of keys) {
    if (!sources.includes(key)) {
      throw new ConfigError(
        `${field}.${key}`,
        `is not where a key of the route's credential kind ${ctx.credentialKind} is (expected one of: ${sources.join(', ')}); an endpoint takes its route's kind, header and signing service`,
      );
    }
  }
  if (keys.length === 0) throw new ConfigError(field, `must name where the endpoint's key is: one of ${sources.join(', ')}`);
  const out: Record<string, string> = {};
  for (const key of keys) {
    const value = input[key];
    if (key === 'env') {
      if (typeof value !== 'string' || !ENV_NAME.test(value)) throw new ConfigError(`${field}.env`, `must be an environment variable name (got ${JSON.stringify(value)})`);
    } else if (typeof value !== 'string' || value.length === 0 || value.length > 4096) {
      throw new ConfigError(`${field}.${key}`, 'must be a file path');
    }
    out[key] = value;
  }
  const [first, second] = (CREDENTIAL_KINDS[ctx.credentialKind].together ?? []).map((role) => CREDENTIAL_KINDS[ctx.credentialKind].secrets[role]!);
  if (first !== undefined && second !== undefined && (out[first] === undefined) !== (out[second] === undefined)) {
    throw new ConfigError(`${field}.${second}`, `and ${first} must be set together`);
  }
  if (ctx.credentialKind === 'aws-sigv4' && out.accessKeyIdFile === undefined) {
    throw new ConfigError(`${field}.accessKeyIdFile`, 'is required with sessionTokenFile: a session token goes with its key pair');
  }
  return out;
}
