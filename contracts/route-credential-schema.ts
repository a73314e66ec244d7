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

/**
 * Where a route's credential comes from. The config file and the operator's snapshot are written by whoever runs
 * the process or owns the ProxyConfig: they name a credential in full. The config API has no authentication, so
 * a route added there may only take `{kind: none}` or `{use: <route>}`, the credential of a route someone
 * trusted declared (ADR 1007): never a key picked by name, a file, a scope or a new AWS signing scope.
 */
export type DeclaredCredentials = (route: string) => CredentialDefinition | undefined;

export function parseRouteCredential(input: unknown, field: string, route: string, format: string, declared?: DeclaredCredentials): CredentialDefinition {
  if (!isRecord(input)) throw new ConfigError(field, 'must be an object');
  const definition = declared !== undefined ? declaredCredential(input, field, declared) : ownCredential(input, field, route);
  checkSigningBound(definition, field, format);
  return definition;
}

function ownCredential(input: Obj, field: string, route: string): CredentialDefinition {
  if (Object.hasOwn(input, 'use')) {
    throw new ConfigError(`${field}.use`, 'is for routes added through the config API; here name the credential itself ({kind: api-key | google-adc | aws-sigv4 | none, ...})');
  }
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

const DECLARED_ONLY =
  'a route added through the config API, which has no authentication, takes {kind: none} or {use: <route>}: the credential of a built-in route or of a route in the config file or the ProxyConfig. Its kind, key, variable, file, scopes or signing service cannot be set here';

function declaredCredential(input: Obj, field: string, declared: DeclaredCredentials): CredentialDefinition {
  const keys = Object.keys(input);
  if (keys.length === 1 && input.kind === 'none') return { kind: 'none' };
  for (const key of keys) if (key !== 'use') throw new ConfigError(`${field}.${key}`, `cannot be set: ${DECLARED_ONLY}`);
  const name = input.use;
  if (typeof name !== 'string') throw new ConfigError(`${field}.use`, `must name a route (got ${JSON.stringify(name)}): ${DECLARED_ONLY}`);
  const definition = declared(name);
  if (definition === undefined) {
    throw new ConfigError(
      `${field}.use`,
      `names no route declared outside this API (got ${JSON.stringify(name)}): use a built-in route or one of the config file or the ProxyConfig`,
    );
  }
  return structuredClone(definition);
}

/**
 * AWS SigV4 signs with an identity whose IAM role may reach far more than Bedrock; the proxy signs only what it
 * meters, the Bedrock runtime's model invocations, so the kind belongs to the bedrock format alone. The signer
 * also refuses any other path (sidecar/src/auth/aws-sigv4.ts).
 */
function checkSigningBound(definition: CredentialDefinition, field: string, format: string): void {
  if (definition.kind === 'aws-sigv4' && format !== 'bedrock') {
    throw new ConfigError(`${field}.kind`, `aws-sigv4 signs only Bedrock's runtime API: it takes format bedrock (got format ${format})`);
  }
}
