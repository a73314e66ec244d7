// One interface for every upstream credential, and one factory that builds a provider from a credential
// definition (contracts/credential-kinds.ts), switching on its kind. Building never fails and never does I/O
// beyond reading a configured key file: a missing credential surfaces as a CredentialError on the call that
// needs it, so one unconfigured provider cannot keep the proxy from serving the others.

import type { Logger } from 'pino';
import type { CredentialsConfig, RuntimeConfig, UpstreamConfig } from '../../../contracts/runtime-config.ts';
import { ROUTE_NAMES, ROUTES, type RouteName } from '../../../contracts/routes.ts';
import {
  BUILT_IN_CREDENTIAL_IDS,
  BUILT_IN_CREDENTIALS,
  CREDENTIAL_KINDS,
  type BuiltInCredentialId,
  type CredentialDefinition,
  type CredentialFileSetting,
  type CredentialSecret,
} from '../../../contracts/credential-kinds.ts';
import { createApiKeyProvider } from './api-key.ts';
import { createAwsSigV4Provider, staticAwsCredentialsFromFiles } from './aws-sigv4.ts';
import { createGoogleAdcProvider } from './google-adc.ts';
import { createNoCredentialProvider } from './no-credential.ts';

export { CredentialError } from './credential-error.ts';

export interface OutgoingRequest {
  method: string;
  url: URL;
  headers: Record<string, string>;
  body: Buffer | null;
}

export interface CredentialProvider {
  /** The credential's id: a built-in one (openai-api-key, google-adc, …) or `route:<name>`. */
  readonly kind: string;
  /**
   * Adds the upstream credential to req.headers (and whatever signing needs: SigV4 also sets `host` and
   * re-encodes req.url.pathname the way AWS expects). Throws CredentialError.
   */
  apply(req: OutgoingRequest): Promise<void>;
  /** Cheap readiness check for /healthz: null when fine, else what is wrong. */
  problem(): string | null;
  close(): void;
}

type Upstreams = RuntimeConfig['upstreams'];

/** What a provider needs besides its definition: who it is, where its settings are named, where it reads. */
export interface CredentialContext {
  id: string;
  /** How messages name it: `OpenAI API key`, `API key of route mistral`. */
  label: string;
  /** Where its file is set, for messages: `credentials.openaiApiKeyFile`, `routes[mistral].credential.file`. */
  fileSetting: string;
  /** The route's upstream settings, read on every SigV4 call (its region). */
  upstream: () => UpstreamConfig | undefined;
  regionSetting?: string;
  /** Google: skips the library's project-id discovery (gcloud, metadata server) when a route names a project. */
  projectId?: string;
  logger: Logger;
  env: NodeJS.ProcessEnv;
}

/** The one factory: a provider for any credential definition. */
export function createCredentialProvider(definition: CredentialDefinition, ctx: CredentialContext): CredentialProvider {
  switch (definition.kind) {
    case 'api-key':
      return createApiKeyProvider({
        kind: ctx.id,
        definition,
        label: ctx.label,
        fileSetting: ctx.fileSetting,
        env: ctx.env,
        logger: ctx.logger,
        ...optional('file', definition.file),
      });
    case 'google-adc':
      return createGoogleAdcProvider({
        id: ctx.id,
        logger: ctx.logger,
        scopes: definition.scopes,
        ...optional('credentialsFile', definition.file),
        ...optional('projectId', ctx.projectId),
      });
    case 'aws-sigv4': {
      const region = definition.region;
      const { accessKeyIdFile, secretAccessKeyFile, sessionTokenFile } = definition;
      return createAwsSigV4Provider({
        id: ctx.id,
        service: definition.service,
        logger: ctx.logger,
        env: ctx.env,
        upstream: region === undefined ? ctx.upstream : () => ({ ...ctx.upstream(), region }),
        ...optional('regionSetting', ctx.regionSetting),
        ...(accessKeyIdFile && secretAccessKeyFile ? { credentials: staticAwsCredentialsFromFiles(accessKeyIdFile, secretAccessKeyFile, sessionTokenFile) } : {}),
      });
    }
    case 'none':
      return createNoCredentialProvider(ctx.id);
  }
}

function optional<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: V };
}

export interface CredentialProvidersOptions {
  credentials: CredentialsConfig;
  /** The upstream settings, or a getter returning the live ones (the region is read on every SigV4 call). */
  upstreams: Upstreams | (() => Upstreams);
  logger: Logger;
  /** Where API keys and the AWS region are read from; defaults to process.env. */
  env?: NodeJS.ProcessEnv;
}

/** The routes using a built-in credential, from the route table. */
function routesUsing(id: BuiltInCredentialId): RouteName[] {
  return ROUTE_NAMES.filter((route) => ROUTES[route].credential === id);
}

/** A built-in credential's definition with the files its `credentials.*File` settings name filled in. */
export function builtInDefinition(id: BuiltInCredentialId, credentials: CredentialsConfig): CredentialDefinition {
  const builtIn = BUILT_IN_CREDENTIALS[id];
  const definition: Record<string, unknown> = { ...builtIn.definition };
  const fields = CREDENTIAL_KINDS[builtIn.definition.kind].secrets;
  for (const [role, secret] of Object.entries(builtIn.secrets as Readonly<Record<string, CredentialSecret>>)) {
    const file = credentials[secret.setting as CredentialFileSetting];
    if (file !== undefined) definition[fields[role]!] = file;
  }
  // The AWS key pair is used only whole (the validator refuses half of it).
  if (definition.kind === 'aws-sigv4' && (definition.accessKeyIdFile === undefined || definition.secretAccessKeyFile === undefined)) {
    delete definition.accessKeyIdFile;
    delete definition.secretAccessKeyFile;
    delete definition.sessionTokenFile;
  }
  return definition as unknown as CredentialDefinition;
}

/** The settings (credentials.*File) a built-in credential reads. */
export function builtInSettings(id: BuiltInCredentialId): CredentialFileSetting[] {
  return Object.values(BUILT_IN_CREDENTIALS[id].secrets as Readonly<Record<string, CredentialSecret>>).map((secret) => secret.setting as CredentialFileSetting);
}

/** One provider per built-in credential, from the credentials config. */
export function createCredentialProviders(opts: CredentialProvidersOptions): Record<BuiltInCredentialId, CredentialProvider> {
  const env = opts.env ?? process.env;
  const upstreams = typeof opts.upstreams === 'function' ? opts.upstreams : () => opts.upstreams as Upstreams;
  const logger = opts.logger.child({ component: 'credentials' });
  const projectId = routesUsing('google-adc')
    .map((route) => upstreams()[route]?.project)
    .find((project) => project);
  const out = {} as Record<BuiltInCredentialId, CredentialProvider>;
  for (const id of BUILT_IN_CREDENTIAL_IDS) {
    const routes = routesUsing(id);
    const definition = builtInDefinition(id, opts.credentials);
    const secrets = Object.values(BUILT_IN_CREDENTIALS[id].secrets as Readonly<Record<string, CredentialSecret>>);
    out[id] = createCredentialProvider(definition, {
      id,
      label: BUILT_IN_CREDENTIALS[id].label,
      fileSetting: secrets[0] ? `credentials.${secrets[0].setting}` : '',
      // the settings of the first of its routes that names them (the table has one SigV4 route today)
      upstream: () => routes.map((route) => upstreams()[route]).find((upstream) => upstream !== undefined),
      regionSetting: `upstreams.${routes[0] ?? 'gamma-cloudb'}.region`,
      ...optional('projectId', projectId),
      logger,
      env,
    });
  }
  return out;
}
