// A versioned config snapshot as the operator holds and sends it. The version is a digest of the rendered
// patch and of the identity and revision of every Secret it draws on (never the secret values), so it is
// the same on every operator replica and changes whenever the config or a referenced Secret changes.

import { createHash } from 'node:crypto';
import type { RuntimeConfigPatch } from '../../../contracts/config-schema.ts';

export interface Snapshot {
  version: string;
  /** `namespace/name` of the ProxyConfig, or '' for the built-in defaults. */
  source: string;
  configJson: string;
  credentials: Record<string, Buffer>;
}

export interface SecretRevision {
  name: string;
  uid?: string | undefined;
  resourceVersion?: string | undefined;
}

export function buildSnapshot(source: string, patch: RuntimeConfigPatch, credentials: Record<string, Buffer>, secrets: readonly SecretRevision[]): Snapshot {
  const configJson = JSON.stringify(patch);
  const digest = createHash('sha256')
    .update(configJson)
    .update('\0')
    .update(JSON.stringify(Object.keys(credentials).sort()))
    .update('\0')
    .update(JSON.stringify([...secrets].sort((a, b) => a.name.localeCompare(b.name)).map((s) => [s.name, s.uid ?? '', s.resourceVersion ?? ''])))
    .digest('hex');
  return { version: digest.slice(0, 16), source, configJson, credentials };
}

export const BUILTIN_SNAPSHOT: Snapshot = buildSnapshot('', {}, {}, []);

/** A snapshot as it may be logged: credential names only. */
export function redactSnapshot(s: Snapshot): { version: string; source: string; configBytes: number; credentials: string[] } {
  return { version: s.version, source: s.source, configBytes: s.configJson.length, credentials: Object.keys(s.credentials).sort() };
}
