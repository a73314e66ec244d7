// Static API keys in a header, as the credential's definition says (`Authorization: Bearer <key>` for OpenAI,
// `x-api-key` plus a default `anthropic-version` for Anthropic, whatever a configured route names). A key file
// (a mounted Secret) wins over the environment variable, and is re-read when it changes.

import type { Logger } from 'pino';
import { CredentialError } from './credential-error.ts';
import type { CredentialProvider, OutgoingRequest } from './credential-provider.ts';
import { hasHeader, setHeader } from './header-record.ts';
import { WatchedSecretFile } from './watched-secret-file.ts';
import { BUILT_IN_CREDENTIALS, type ApiKeyCredential, type BuiltInCredentialId, type CredentialSecret } from '../../../contracts/credential-kinds.ts';

export interface ApiKeyOptions {
  /** The credential's id: a built-in one (openai-api-key, anthropic-api-key) or `route:<name>`. */
  kind: string;
  /** Which header, prefix and variable; default: the built-in credential of that id. */
  definition?: ApiKeyCredential;
  /** How messages name it; default: the built-in credential's label. */
  label?: string;
  /** Where the file is set, for messages; default: the built-in credential's setting. */
  fileSetting?: string;
  /** Key file path from the config; takes precedence over the environment variable. */
  file?: string;
  env: NodeJS.ProcessEnv;
  logger: Logger;
  pollIntervalMs?: number;
}

/** The built-in api-key credential of an id, with its label and file setting. */
function builtIn(id: string): { definition: ApiKeyCredential; label: string; fileSetting: string } | undefined {
  if (!Object.hasOwn(BUILT_IN_CREDENTIALS, id)) return undefined;
  const credential = BUILT_IN_CREDENTIALS[id as BuiltInCredentialId];
  if (credential.definition.kind !== 'api-key') return undefined;
  const secret = (credential.secrets as Readonly<Record<string, CredentialSecret>>).apiKey;
  return { definition: credential.definition, label: credential.label, fileSetting: `credentials.${secret?.setting ?? ''}` };
}

export function createApiKeyProvider(options: ApiKeyOptions): CredentialProvider {
  const { kind } = options;
  const fallback = builtIn(kind);
  const definition = options.definition ?? fallback?.definition;
  if (definition === undefined) throw new TypeError(`credential ${kind} is not an api-key credential`);
  const label = options.label ?? fallback?.label ?? `API key of ${kind}`;
  const fileSetting = options.fileSetting ?? fallback?.fileSetting ?? 'its file';
  const envVar = definition.env;
  const envKey = envVar === undefined ? undefined : options.env[envVar]?.trim() || undefined;
  const defaults = Object.entries(definition.headers ?? {});
  const file = options.file
    ? new WatchedSecretFile({
        path: options.file,
        label,
        logger: options.logger,
        ...(options.pollIntervalMs ? { pollIntervalMs: options.pollIntervalMs } : {}),
      })
    : undefined;

  function missing(): string {
    if (file) return file.problem ?? `${label} file ${file.path} has no key`;
    return envVar === undefined ? `no ${label}: set ${fileSetting}` : `no ${label}: set ${envVar} or ${fileSetting}`;
  }

  return {
    kind,
    async apply(req: OutgoingRequest): Promise<void> {
      const key = file ? file.value : envKey;
      if (key === undefined) throw new CredentialError(kind, missing());
      setHeader(req.headers, definition.header, definition.prefix + key);
      // e.g. anthropic-version: the caller chose an API version for its body shape; only fill it in when absent.
      for (const [name, value] of defaults) if (!hasHeader(req.headers, name)) req.headers[name] = value;
    },
    // An unconfigured key is not a fault of the process (a proxy may never serve that provider);
    // a configured file that cannot be read is.
    problem(): string | null {
      return file && file.value === undefined ? missing() : null;
    },
    close(): void {
      file?.close();
    },
  };
}
