// Validation of a configured route's credential (`routes[i].credential`): one parser per kind of the credential
// table (contracts/credential-kinds.ts), each naming the field it refuses. The key itself never appears here:
// an api-key names where its key is (an environment variable or a file), and the operator turns a ProxyConfig's
// Secret reference into such a file.

import { CLOUD_PLATFORM_SCOPE, CREDENTIAL_KIND_NAMES, CREDENTIAL_KINDS, type CredentialDefinition, type CredentialKindName } from './credential-kinds.ts';
import { ConfigError } from './config-error.ts';
import { isRecord } from './json-record.ts';

type Obj = Record<string, unknown>;

const HEADER_NAME = /^[a-z0-9!#$%&'*+.^_`|~-]{1,128}$/;
const PREFIX = /^[\x20-\x7e]{0,64}$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
const SCOPE = /^https:\/\/[^\s]{1,256}$/;
const AWS_NAME = /^[a-z0-9][a-z0-9-]{0,62}$/;

/** Options each kind takes, besides `kind`: its own settings and the file field of each of its secrets. */
const KIND_FIELDS: Readonly<Record<CredentialKindName, readonly string[]>> = {
  'api-key': ['header', 'prefix', 'env'],
  'google-adc': ['scopes'],
  'aws-sigv4': ['service', 'region'],
  none: [],
};

function fieldsOf(kind: CredentialKindName): string[] {
  return ['kind', ...KIND_FIELDS[kind], ...Object.values(CREDENTIAL_KINDS[kind].secrets)];
}

function text(v: Obj, key: string, field: string, pattern: RegExp, hint: string): string | undefined {
  const value = v[key];
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || !pattern.test(value)) throw new ConfigError(`${field}.${key}`, `${hint} (got ${JSON.stringify(value)})`);
  return value;
}

function files(v: Obj, field: string, kind: CredentialKindName): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of Object.values(CREDENTIAL_KINDS[kind].secrets)) {
    const value = v[key];
    if (value === undefined) continue;
    if (typeof value !== 'string' || value.length === 0 || value.length > 4096) throw new ConfigError(`${field}.${key}`, 'must be a file path');
    out[key] = value;
  }
  const [first, second] = (CREDENTIAL_KINDS[kind].together ?? []).map((role) => CREDENTIAL_KINDS[kind].secrets[role]!);
  if (first !== undefined && second !== undefined && (out[first] === undefined) !== (out[second] === undefined)) {
    throw new ConfigError(`${field}.${second}`, `and ${first} must be set together`);
  }
  return out;
}

function apiKey(v: Obj, field: string, route: string): CredentialDefinition {
  const header = (text(v, 'header', field, HEADER_NAME, 'must be a header name') ?? 'authorization').toLowerCase();
  const prefix = text(v, 'prefix', field, PREFIX, 'must be at most 64 printable characters') ?? (header === 'authorization' ? 'Bearer ' : '');
  const env = text(v, 'env', field, ENV_NAME, 'must be an environment variable name');
  const { file } = files(v, field, 'api-key');
  return {
    kind: 'api-key',
    header,
    prefix,
    ...(env !== undefined ? { env } : file === undefined ? { env: defaultKeyVariable(route) } : {}),
    ...(file !== undefined ? { file } : {}),
  };
}

function googleAdc(v: Obj, field: string): CredentialDefinition {
  let scopes = [CLOUD_PLATFORM_SCOPE];
  if (v.scopes !== undefined) {
    if (!Array.isArray(v.scopes) || v.scopes.length === 0 || v.scopes.length > 16) throw new ConfigError(`${field}.scopes`, 'must be a list of 1 to 16 OAuth scopes');
    scopes = v.scopes.map((scope, i) => {
      if (typeof scope !== 'string' || !SCOPE.test(scope)) throw new ConfigError(`${field}.scopes[${i}]`, `must be an https:// OAuth scope (got ${JSON.stringify(scope)})`);
      return scope;
    });
  }
  return { kind: 'google-adc', scopes, ...files(v, field, 'google-adc') };
}

function awsSigV4(v: Obj, field: string): CredentialDefinition {
  const service = text(v, 'service', field, AWS_NAME, 'must be an AWS signing name such as bedrock');
  if (service === undefined) throw new ConfigError(`${field}.service`, 'is required: the AWS signing name, e.g. bedrock');
  const region = text(v, 'region', field, AWS_NAME, 'must be a region such as us-east-1');
  return { kind: 'aws-sigv4', service, ...(region !== undefined ? { region } : {}), ...files(v, field, 'aws-sigv4') };
}

/** The variable an api-key route reads when it names none: MY_ROUTE_API_KEY for route my-route. */
export function defaultKeyVariable(route: string): string {
  return `${route.toUpperCase().replaceAll('-', '_')}_API_KEY`;
}

export function parseRouteCredential(input: unknown, field: string, route: string): CredentialDefinition {
  if (!isRecord(input)) throw new ConfigError(field, 'must be an object');
  const kind = input.kind;
  if (typeof kind !== 'string' || !(CREDENTIAL_KIND_NAMES as readonly string[]).includes(kind)) {
    throw new ConfigError(`${field}.kind`, `must be one of ${CREDENTIAL_KIND_NAMES.join(', ')} (got ${JSON.stringify(kind)})`);
  }
  const known = fieldsOf(kind as CredentialKindName);
  for (const key of Object.keys(input)) {
    if (!known.includes(key)) throw new ConfigError(`${field}.${key}`, `is not a setting of credential kind ${kind} (expected one of: ${known.join(', ')})`);
  }
  switch (kind as CredentialKindName) {
    case 'api-key':
      return apiKey(input, field, route);
    case 'google-adc':
      return googleAdc(input, field);
    case 'aws-sigv4':
      return awsSigV4(input, field);
    case 'none':
      return { kind: 'none' };
  }
}

/**
 * The fields of a credential that say where a secret is (a file, an environment variable): the config API, which
 * has no authentication, may not set them (ADR 1003), so a caller can never pick which secret the proxy sends.
 */
export function credentialSourceFields(kind: CredentialKindName): string[] {
  return [...(kind === 'api-key' ? ['env'] : []), ...Object.values(CREDENTIAL_KINDS[kind].secrets)];
}
