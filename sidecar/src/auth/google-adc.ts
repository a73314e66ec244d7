// Google Application Default Credentials through google-auth-library: a key file named by
// GOOGLE_APPLICATION_CREDENTIALS (service_account, authorized_user, external_account), the gcloud
// well-known file, or the metadata server (GCE_METADATA_HOST honoured by the library). The library reads
// those variables from process.env itself.

import type { GoogleAuth, GoogleAuthOptions } from 'google-auth-library';
import type { Logger } from 'pino';
import { CredentialError } from './credential-error.ts';
import type { CredentialProvider, OutgoingRequest } from './credential-provider.ts';
import { summarizeError } from './error-summary.ts';
import { setHeader } from './header-record.ts';
import { RefreshingCache } from './refreshing-cache.ts';
import { WatchedSecretFile } from './watched-secret-file.ts';

import { CLOUD_PLATFORM_SCOPE } from '../../../contracts/credential-kinds.ts';

/** Same as the library's own eager-refresh threshold, so our early refresh really fetches a new token. */
const REFRESH_MARGIN_MS = 5 * 60_000;

export interface GoogleAdcOptions {
  logger: Logger;
  /** Skips the library's project-id discovery (gcloud, metadata server) when the config names a project. */
  projectId?: string;
  /** Extra GoogleAuth options; tests use `clientOptions.transporter` to reach fake token endpoints. */
  authOptions?: GoogleAuthOptions;
  /**
   * A credentials JSON file (service account key or external_account config) pushed from a Secret. It is
   * watched: when the Secret is rotated, the next call builds a new client from the new content and drops
   * the token minted with the old one.
   */
  credentialsFile?: string;
  /** OAuth scopes; default cloud-platform. */
  scopes?: readonly string[];
  /** The credential's id in errors and metrics; default google-adc (the built-in one). */
  id?: string;
}

interface TokenExpiry {
  credentials?: { expiry_date?: number | null };
}

export function createGoogleAdcProvider(options: GoogleAdcOptions): CredentialProvider {
  const { logger } = options;
  const file = options.credentialsFile ? new WatchedSecretFile({ path: options.credentialsFile, label: 'Google credentials file', logger }) : undefined;
  // Loaded on the first Google call: a proxy that never uses a Vertex route never pays its memory.
  let auth: Promise<GoogleAuth> | null = null;
  let builtFrom: string | undefined;
  const loadAuth = () => {
    if (file) {
      const content = file.value;
      if (content === undefined) throw new Error(`Google credentials file ${file.path}: ${file.problem ?? 'empty'}`);
      if (content !== builtFrom) {
        const credentials = parseCredentialsJson(content, file.path);
        builtFrom = content;
        auth = buildAuth(credentials);
      }
    }
    return (auth ??= buildAuth(undefined));
  };
  const buildAuth = (credentials: GoogleAuthOptions['credentials'] | undefined) =>
    import('google-auth-library').then(
      ({ GoogleAuth }) =>
        new GoogleAuth({
          ...options.authOptions,
          ...(credentials ? { credentials } : {}),
          scopes: [...(options.scopes ?? [CLOUD_PLATFORM_SCOPE])],
          ...(options.projectId ? { projectId: options.projectId } : {}),
          clientOptions: { eagerRefreshThresholdMillis: REFRESH_MARGIN_MS, ...options.authOptions?.clientOptions },
        }),
    );

  const cache = new RefreshingCache<string>({
    refreshMarginMs: REFRESH_MARGIN_MS,
    fetch: async () => {
      const client = await (await loadAuth()).getClient();
      const { token } = await client.getAccessToken();
      if (!token) throw new Error('the ADC client returned no access token');
      const expiry = (client as TokenExpiry).credentials?.expiry_date;
      // Without a known expiry, ask the library each time; it keeps its own cache.
      return { value: token, expiresAt: typeof expiry === 'number' ? expiry : Date.now() };
    },
    onStaleServed: (error) => {
      logger.warn({ err: summarizeError(error) }, 'failed to refresh ADC token; using the current one until it expires');
    },
  });

  return {
    kind: options.id ?? 'google-adc',
    async apply(req: OutgoingRequest): Promise<void> {
      // A rotated credentials file: the cached token belongs to the old credential.
      if (file && builtFrom !== undefined && file.value !== undefined && file.value !== builtFrom) cache.invalidate();
      let token: string;
      try {
        token = await cache.get();
      } catch (error) {
        const summary = summarizeError(error);
        logger.error({ err: summary, credential: options.id ?? 'google-adc' }, 'failed to get ADC token');
        throw new CredentialError(options.id ?? 'google-adc', `failed to get ADC token: ${summary.message}`, { cause: error });
      }
      setHeader(req.headers, 'authorization', `Bearer ${token}`);
    },
    problem(): string | null {
      const error = cache.lastError;
      return error === undefined ? null : `failed to get ADC token: ${summarizeError(error).message}`;
    },
    close(): void {
      file?.close();
    },
  };
}

/**
 * The credentials file as JSON. JSON.parse's own message quotes the text around the fault, which for a file
 * that is not what it should be can be a secret (a key file named by mistake): that message would reach the
 * 502 body, the span and the log. The error names the file and its size, never its contents.
 */
function parseCredentialsJson(content: string, path: string): GoogleAuthOptions['credentials'] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(content);
  } catch {
    throw new Error(`Google credentials file ${path} is not JSON (${Buffer.byteLength(content)} bytes); it must hold a service account key or an external_account config`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new Error(`Google credentials file ${path} is not a JSON object; it must hold a service account key or an external_account config`);
  }
  return parsed;
}
