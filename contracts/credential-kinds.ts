// The one table of upstream credential kinds, and the built-in credentials the built-in routes use. A
// credential is data: which kind, that kind's options (a header and prefix, scopes, a SigV4 service), and where
// its secret values come from. Everything that delivers a credential derives from here: the runtime config's
// `credentials.*File` settings, the config validator, the ProxyConfig CRD's Secret references, the operator's
// render step, the snapshot's credential names and the sidecar's files (ADR 1206). Vendor names appear only in
// BUILT_IN_CREDENTIALS.

/** A credential's kind: how the proxy authenticates to the upstream. */
export const CREDENTIAL_KIND_NAMES = ['api-key', 'google-adc', 'aws-sigv4', 'none'] as const;
export type CredentialKindName = (typeof CREDENTIAL_KIND_NAMES)[number];

/** A static key sent in a header: `<header>: <prefix><key>`. */
export interface ApiKeyCredential {
  kind: 'api-key';
  /** Lower-case header name, e.g. authorization, x-api-key, api-key. */
  header: string;
  /** Written before the key, e.g. `Bearer `; empty for a bare key. */
  prefix: string;
  /** Environment variable holding the key, read at start. */
  env?: string;
  /** File holding the key (a mounted Secret), re-read when it changes; wins over env. */
  file?: string;
  /** Headers sent with the key when the caller sent none (Anthropic's anthropic-version). */
  headers?: Readonly<Record<string, string>>;
}

/** A Google access token from Application Default Credentials (or a pushed key file). */
export interface GoogleAdcCredential {
  kind: 'google-adc';
  scopes: readonly string[];
  /** A service account key or external_account JSON file; else Application Default Credentials. */
  file?: string;
}

/** AWS Signature Version 4 over host and x-amz-* headers. */
export interface AwsSigV4Credential {
  kind: 'aws-sigv4';
  /** Signing name, e.g. bedrock. */
  service: string;
  /** Signing region; else the route's region, the endpoint's host, AWS_REGION. */
  region?: string;
  /** Files holding a static key pair (and session token); else the AWS default chain. */
  accessKeyIdFile?: string;
  secretAccessKeyFile?: string;
  sessionTokenFile?: string;
}

/** No credential (a model server on loopback); the caller's own are still stripped. */
export interface NoCredential {
  kind: 'none';
}

export type CredentialDefinition = ApiKeyCredential | GoogleAdcCredential | AwsSigV4Credential | NoCredential;

/** A secret value a kind may take from outside (a file, a Secret key in a ProxyConfig). */
export interface CredentialSecret {
  /** The file setting of the built-in credential in `credentials.*` (runtime config). */
  setting: string;
  /** Its name in a config snapshot (the operator sends it, the sidecar writes it to a file). */
  snapshot: string;
  /** Key in the Secret when a grouped CRD reference names none (AWS's key names). */
  defaultKey?: string;
  /** Only with another secret of the same credential (AWS's key id and secret). */
  optional?: boolean;
}

/** What each kind takes: its secret values by role, each with the definition's field that names its file. */
export interface CredentialKindSpec {
  description: string;
  /** Secret role → the field of the definition holding its file; empty for none. */
  secrets: Readonly<Record<string, string>>;
  /** Roles that must be set together (both or neither). */
  together?: readonly string[];
}

export const CREDENTIAL_KINDS: Readonly<Record<CredentialKindName, CredentialKindSpec>> = {
  'api-key': { description: 'a static key in a request header', secrets: { apiKey: 'file' } },
  'google-adc': { description: 'a Google access token from Application Default Credentials or a service account key file', secrets: { serviceAccount: 'file' } },
  'aws-sigv4': {
    description: 'AWS SigV4 signing with the default AWS credential chain or static keys',
    secrets: { accessKeyId: 'accessKeyIdFile', secretAccessKey: 'secretAccessKeyFile', sessionToken: 'sessionTokenFile' },
    together: ['accessKeyId', 'secretAccessKey'],
  },
  none: { description: 'no credential', secrets: {} },
};

export const CLOUD_PLATFORM_SCOPE = 'https://www.googleapis.com/auth/cloud-platform';

/** A built-in credential: its definition, how messages name it, and its secret values' settings and snapshot names. */
export interface BuiltInCredential {
  definition: CredentialDefinition;
  label: string;
  /** Secret role → names; the CRD groups them under `credentials.<crdField>`. */
  secrets: Readonly<Record<string, CredentialSecret>>;
  /** The field under the ProxyConfig's spec.credentials; absent: nothing to deliver. */
  crdField?: string;
  /** A grouped reference (one Secret, one key per role, with defaults) rather than one {secretName, key}. */
  grouped?: boolean;
  /** Says which routes use it, for the CRD's description. */
  crdDescription?: string;
}

/**
 * The built-in credentials, keyed by the id the built-in routes name. Their settings and snapshot names are the
 * ones Tollgate has always used (credentials.openaiApiKeyFile, snapshot openaiApiKey, …).
 */
export const BUILT_IN_CREDENTIALS = {
  'google-adc': {
    definition: { kind: 'google-adc', scopes: [CLOUD_PLATFORM_SCOPE] },
    label: 'Google credentials',
    secrets: { serviceAccount: { setting: 'googleCredentialsFile', snapshot: 'googleServiceAccount' } },
    crdField: 'googleServiceAccount',
    crdDescription: "Secret key holding a Google service account key file (JSON) for the Vertex AI routes; when absent, the pod's Application Default Credentials are used.",
  },
  'openai-api-key': {
    definition: { kind: 'api-key', header: 'authorization', prefix: 'Bearer ', env: 'OPENAI_API_KEY' },
    label: 'OpenAI API key',
    secrets: { apiKey: { setting: 'openaiApiKeyFile', snapshot: 'openaiApiKey' } },
    crdField: 'openaiApiKey',
    crdDescription: 'Secret key holding the OpenAI API key (route beta).',
  },
  'anthropic-api-key': {
    definition: { kind: 'api-key', header: 'x-api-key', prefix: '', env: 'ANTHROPIC_API_KEY', headers: { 'anthropic-version': '2023-06-01' } },
    label: 'Anthropic API key',
    secrets: { apiKey: { setting: 'anthropicApiKeyFile', snapshot: 'anthropicApiKey' } },
    crdField: 'anthropicApiKey',
    crdDescription: 'Secret key holding the Anthropic API key (route gamma-direct).',
  },
  'aws-sigv4': {
    definition: { kind: 'aws-sigv4', service: 'bedrock' },
    label: 'AWS credentials',
    secrets: {
      accessKeyId: { setting: 'awsAccessKeyIdFile', snapshot: 'awsAccessKeyId', defaultKey: 'AWS_ACCESS_KEY_ID' },
      secretAccessKey: { setting: 'awsSecretAccessKeyFile', snapshot: 'awsSecretAccessKey', defaultKey: 'AWS_SECRET_ACCESS_KEY' },
      sessionToken: { setting: 'awsSessionTokenFile', snapshot: 'awsSessionToken', optional: true },
    },
    crdField: 'aws',
    grouped: true,
    crdDescription: "Secret holding AWS access keys for Bedrock (route gamma-cloudb); when absent, the pod's default AWS credential chain is used.",
  },
  none: { definition: { kind: 'none' }, label: 'no credential', secrets: {} },
} as const satisfies Record<string, BuiltInCredential>;

export type BuiltInCredentialId = keyof typeof BUILT_IN_CREDENTIALS;
export const BUILT_IN_CREDENTIAL_IDS = Object.keys(BUILT_IN_CREDENTIALS) as BuiltInCredentialId[];

type SecretsOf<C> = C extends { secrets: infer S } ? S[keyof S] : never;
type AnySecret = SecretsOf<(typeof BUILT_IN_CREDENTIALS)[BuiltInCredentialId]>;

/** A `credentials.*File` setting of the runtime config (credentials.openaiApiKeyFile, …). */
export type CredentialFileSetting = AnySecret extends { setting: infer S } ? S & string : never;
/** A built-in credential's value in a config snapshot (openaiApiKey, …). */
export type BuiltInSnapshotName = AnySecret extends { snapshot: infer S } ? S & string : never;

/** Every built-in secret with its credential, in table order. */
export function builtInSecrets(): { id: BuiltInCredentialId; role: string; secret: CredentialSecret }[] {
  return BUILT_IN_CREDENTIAL_IDS.flatMap((id) =>
    Object.entries(BUILT_IN_CREDENTIALS[id].secrets as Readonly<Record<string, CredentialSecret>>).map(([role, secret]) => ({ id, role, secret })),
  );
}

/** A user route's secret in a snapshot: `route.<name>.<role>` (route.mistral.apiKey). */
export type RouteSecretName = `route.${string}.${string}`;

export function routeSecretName(route: string, role: string): RouteSecretName {
  return `route.${route}.${role}`;
}

/** An endpoint's own secret in a snapshot: `route.<name>.<endpoint>.<role>` (route.beta.second-key.apiKey, ADR 0008). */
export type EndpointSecretName = `route.${string}.${string}.${string}`;

export function endpointSecretName(route: string, endpoint: string, role: string): EndpointSecretName {
  return `route.${route}.${endpoint}.${role}`;
}

const LABEL = '[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?';
const ENDPOINT_SECRET = new RegExp(`^route\\.(${LABEL})\\.(${LABEL})\\.([A-Za-z]+)$`);

/** Whether a role is a secret of some credential kind (apiKey, serviceAccount, accessKeyId, …). */
function knownRole(role: string): boolean {
  return CREDENTIAL_KIND_NAMES.some((kind) => Object.hasOwn(CREDENTIAL_KINDS[kind].secrets, role));
}

/** The route, endpoint and role of a `route.<name>.<endpoint>.<role>` snapshot name, or undefined when it is not one. */
export function parseEndpointSecretName(name: string): { route: string; endpoint: string; role: string } | undefined {
  const match = ENDPOINT_SECRET.exec(name);
  if (!match || !knownRole(match[5]!)) return undefined;
  return { route: match[1]!, endpoint: match[3]!, role: match[5]! };
}

/** The route and role of a `route.<name>.<role>` snapshot name, or undefined when it is not one. */
export function parseRouteSecretName(name: string): { route: string; role: string } | undefined {
  const match = /^route\.([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)\.([A-Za-z]+)$/.exec(name);
  if (!match) return undefined;
  const role = match[3]!;
  return knownRole(role) ? { route: match[1]!, role } : undefined;
}
