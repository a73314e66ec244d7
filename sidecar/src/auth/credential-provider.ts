// One interface for every upstream credential, and the factory that builds one provider per credential
// kind. Building never fails and never does I/O beyond reading a configured key file: a missing credential
// surfaces as a CredentialError on the call that needs it, so one unconfigured provider cannot keep the
// proxy from serving the others.

import type { Logger } from 'pino';
import type { CredentialsConfig, RuntimeConfig } from '../../../contracts/runtime-config.ts';
import { ROUTE_NAMES, ROUTES, type CredentialKind, type RouteName } from '../../../contracts/routes.ts';
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
  readonly kind: CredentialKind;
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

export interface CredentialProvidersOptions {
  credentials: CredentialsConfig;
  /** The upstream settings, or a getter returning the live ones (the region is read on every SigV4 call). */
  upstreams: Upstreams | (() => Upstreams);
  logger: Logger;
  /** Where API keys and the AWS region are read from; defaults to process.env. */
  env?: NodeJS.ProcessEnv;
}

/** The routes each credential kind serves, from the route table. */
function routesUsing(kind: CredentialKind): RouteName[] {
  return ROUTE_NAMES.filter((route) => ROUTES[route].credential === kind);
}

export function createCredentialProviders(opts: CredentialProvidersOptions): Record<CredentialKind, CredentialProvider> {
  const env = opts.env ?? process.env;
  const upstreams = typeof opts.upstreams === 'function' ? opts.upstreams : () => opts.upstreams as Upstreams;
  const initial = upstreams();
  const projectId = routesUsing('google-adc')
    .map((route) => initial[route]?.project)
    .find((project) => project);
  const logger = opts.logger.child({ component: 'credentials' });
  const awsRoutes = routesUsing('aws-sigv4');

  return {
    'google-adc': createGoogleAdcProvider({
      logger,
      ...(projectId ? { projectId } : {}),
      // a key file pushed from a Secret wins over ambient ADC, as GOOGLE_APPLICATION_CREDENTIALS would
      ...(opts.credentials.googleCredentialsFile ? { credentialsFile: opts.credentials.googleCredentialsFile } : {}),
    }),
    'openai-api-key': createApiKeyProvider({
      kind: 'openai-api-key',
      env,
      logger,
      ...(opts.credentials.openaiApiKeyFile ? { file: opts.credentials.openaiApiKeyFile } : {}),
    }),
    'anthropic-api-key': createApiKeyProvider({
      kind: 'anthropic-api-key',
      env,
      logger,
      ...(opts.credentials.anthropicApiKeyFile ? { file: opts.credentials.anthropicApiKeyFile } : {}),
    }),
    'aws-sigv4': createAwsSigV4Provider({
      logger,
      env,
      // the region of the first SigV4 route that names one (the table has one such route today)
      upstream: () => awsRoutes.map((route) => upstreams()[route]).find((upstream) => upstream !== undefined),
      ...(opts.credentials.awsAccessKeyIdFile && opts.credentials.awsSecretAccessKeyFile
        ? { credentials: staticAwsCredentialsFromFiles(opts.credentials.awsAccessKeyIdFile, opts.credentials.awsSecretAccessKeyFile, opts.credentials.awsSessionTokenFile) }
        : {}),
    }),
    none: createNoCredentialProvider(),
  };
}
