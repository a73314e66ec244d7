// Static API keys: OpenAI (`Authorization: Bearer`) and Anthropic (`x-api-key` plus a default
// `anthropic-version`). A key file (a mounted Secret) wins over the environment variable, and is re-read
// when it changes.

import type { Logger } from 'pino';
import { CredentialError } from './credential-error.ts';
import type { CredentialProvider, OutgoingRequest } from './credential-provider.ts';
import { hasHeader, setHeader } from './header-record.ts';
import { WatchedSecretFile } from './watched-secret-file.ts';

export const DEFAULT_ANTHROPIC_VERSION = '2023-06-01';

export type ApiKeyKind = 'openai-api-key' | 'anthropic-api-key';

interface ApiKeyVendor {
  label: string;
  envVar: string;
  fileSetting: string;
  decorate(headers: Record<string, string>, key: string): void;
}

const VENDORS: Record<ApiKeyKind, ApiKeyVendor> = {
  'openai-api-key': {
    label: 'OpenAI API key',
    envVar: 'OPENAI_API_KEY',
    fileSetting: 'credentials.openaiApiKeyFile',
    decorate(headers, key) {
      setHeader(headers, 'authorization', `Bearer ${key}`);
    },
  },
  'anthropic-api-key': {
    label: 'Anthropic API key',
    envVar: 'ANTHROPIC_API_KEY',
    fileSetting: 'credentials.anthropicApiKeyFile',
    decorate(headers, key) {
      setHeader(headers, 'x-api-key', key);
      // The caller chose an API version for its body shape; only fill it in when absent.
      if (!hasHeader(headers, 'anthropic-version')) headers['anthropic-version'] = DEFAULT_ANTHROPIC_VERSION;
    },
  },
};

export interface ApiKeyOptions {
  kind: ApiKeyKind;
  /** Key file path from the config; takes precedence over the environment variable. */
  file?: string;
  env: NodeJS.ProcessEnv;
  logger: Logger;
  pollIntervalMs?: number;
}

export function createApiKeyProvider(options: ApiKeyOptions): CredentialProvider {
  const { kind } = options;
  const vendor = VENDORS[kind];
  const envKey = options.env[vendor.envVar]?.trim() || undefined;
  const file = options.file
    ? new WatchedSecretFile({
        path: options.file,
        label: vendor.label,
        logger: options.logger,
        ...(options.pollIntervalMs ? { pollIntervalMs: options.pollIntervalMs } : {}),
      })
    : undefined;

  function missing(): string {
    if (file) return file.problem ?? `${vendor.label} file ${file.path} has no key`;
    return `no ${vendor.label}: set ${vendor.envVar} or ${vendor.fileSetting}`;
  }

  return {
    kind,
    async apply(req: OutgoingRequest): Promise<void> {
      const key = file ? file.value : envKey;
      if (key === undefined) throw new CredentialError(kind, missing());
      vendor.decorate(req.headers, key);
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
