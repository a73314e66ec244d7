// The sidecar's side of an operator snapshot, on local disk: validation (the same validator as every other
// config source, so the reason names the field), credential values written to 0600 files under
// <stateDir>/credentials (the API-key providers watch those files), and the last good snapshot kept in
// <stateDir>/snapshot.json so that a restarted sidecar runs it while the operator is unreachable. Every file
// is written to a temporary name and renamed, so a reader never sees half a file.

import { chmod, mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { ConfigError } from '../../../contracts/config-error.ts';
import { parseRuntimeConfigPatch, type RuntimeConfigPatch } from '../../../contracts/config-schema.ts';
import {
  builtInSecrets,
  BUILT_IN_CREDENTIALS,
  CREDENTIAL_KINDS,
  endpointSecretName,
  parseEndpointSecretName,
  parseRouteSecretName,
  type CredentialKindName,
  type CredentialSecret,
} from '../../../contracts/credential-kinds.ts';
import type { RouteEndpoint } from '../../../contracts/route-endpoints.ts';
import { ROUTES, type RouteName } from '../../../contracts/routes.ts';
import type { CredentialsConfig, RouteEntry, UpstreamConfig } from '../../../contracts/runtime-config.ts';
import {
  AUDIT_CREDENTIAL_FIELDS,
  type AuditCredentialField,
  auditCredentialName,
  STORAGE_CREDENTIAL_KINDS,
  storageCredentialName,
} from '../../../contracts/snapshot-credentials.ts';

/** A snapshot as received from the operator (proto Snapshot). */
export interface ReceivedSnapshot {
  version: string;
  source: string;
  configJson: string;
  credentials: Record<string, Buffer>;
}

/** A snapshot ready to run: the validated patch, its credentials pointing at files on disk. */
export interface PreparedSnapshot {
  version: string;
  source: string;
  configJson: string;
  credentialNames: string[];
  patch: RuntimeConfigPatch;
}

/** The sidecar refuses a snapshot; the message is the reason sent back in the Nack. */
export class SnapshotRejectedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SnapshotRejectedError';
  }
}

/** `googleServiceAccount` → `google-service-account`. */
function kebab(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}

/**
 * A built-in credential's secret (its snapshot name) → its file, from the credential table; each file is named in
 * the runtime config's credentials section. A service account key keeps the .json its readers expect.
 */
const CREDENTIAL_FILES = new Map<string, string>(
  builtInSecrets().map(({ role, secret }) => [secret.snapshot, `${kebab(secret.snapshot)}${role === 'serviceAccount' ? '.json' : ''}`]),
);
/** A configured route's secret (`route.<name>.<role>`) → route-<name>-<role> files. */
const ROUTE_FILE_PREFIX = 'route-';
/**
 * An endpoint's own secret (`route.<name>.<endpoint>.<role>`) → endpoint-<name>.<endpoint>.<role> files: names
 * are DNS labels, so the dots keep route a-b's endpoint c apart from route a's endpoint b-c.
 */
const ENDPOINT_FILE_PREFIX = 'endpoint-';

const MAX_CREDENTIAL_BYTES = 64 * 1024;

/** Audit sink secrets (`audit.<sink>.<field>`) → audit-<sink>-<field> files. */
const AUDIT_CREDENTIAL = new RegExp(`^audit\\.([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)\\.(${AUDIT_CREDENTIAL_FIELDS.join('|')})$`);
const AUDIT_FILE_PREFIX = 'audit-';
/** Span store key files (`storage.<kind>.credentials`) → storage-<kind>-credentials.json. */
const STORAGE_CREDENTIAL = new RegExp(`^storage\\.(${STORAGE_CREDENTIAL_KINDS.join('|')})\\.credentials$`);

interface SnapshotFile {
  version: string;
  source: string;
  configJson: string;
  credentialNames: string[];
  savedAt: string;
}

export class SnapshotCache {
  readonly stateDir: string;
  readonly credentialsDir: string;
  readonly snapshotFile: string;
  #logger: Logger;

  constructor(stateDir: string, logger: Logger) {
    this.stateDir = stateDir;
    this.credentialsDir = join(stateDir, 'credentials');
    this.snapshotFile = join(stateDir, 'snapshot.json');
    this.#logger = logger;
  }

  credentialFile(name: string): string | undefined {
    // Own keys only: the names come off the wire, and `toString` or `constructor` must not resolve to anything.
    const audit = AUDIT_CREDENTIAL.exec(name);
    if (audit) return join(this.credentialsDir, `${AUDIT_FILE_PREFIX}${audit[1]}-${audit[3]}`);
    const storage = STORAGE_CREDENTIAL.exec(name);
    if (storage) return join(this.credentialsDir, `storage-${storage[1]}-credentials.json`);
    const endpoint = parseEndpointSecretName(name);
    if (endpoint) {
      return join(this.credentialsDir, `${ENDPOINT_FILE_PREFIX}${endpoint.route}.${endpoint.endpoint}.${kebab(endpoint.role)}${endpoint.role === 'serviceAccount' ? '.json' : ''}`);
    }
    const route = parseRouteSecretName(name);
    if (route) return join(this.credentialsDir, `${ROUTE_FILE_PREFIX}${route.route}-${kebab(route.role)}${route.role === 'serviceAccount' ? '.json' : ''}`);
    const file = CREDENTIAL_FILES.get(name);
    return file ? join(this.credentialsDir, file) : undefined;
  }

  /**
   * Validates a received snapshot and writes its credentials; throws SnapshotRejectedError with the reason.
   * Nothing is persisted as "last good" until commit().
   */
  async prepare(received: ReceivedSnapshot): Promise<PreparedSnapshot> {
    const patch = this.#validate(received.configJson);
    const names: string[] = [];
    for (const [name, value] of Object.entries(received.credentials)) {
      if (!this.credentialFile(name)) {
        // A newer operator may send kinds this sidecar does not know; they are not needed to run.
        this.#logger.warn({ credential: name }, 'ignoring unknown credential in config snapshot');
        continue;
      }
      if (value.length === 0 || value.length > MAX_CREDENTIAL_BYTES) {
        throw new SnapshotRejectedError(`credential ${name} must be 1 to ${MAX_CREDENTIAL_BYTES} bytes (got ${value.length})`);
      }
      names.push(name);
    }
    try {
      await mkdir(this.credentialsDir, { recursive: true, mode: 0o700 });
      for (const name of names) await writeIfChanged(this.credentialFile(name)!, received.credentials[name]!);
    } catch (error) {
      throw new SnapshotRejectedError(`cannot write credential files in ${this.credentialsDir}: ${(error as Error).message}`);
    }
    return { version: received.version, source: received.source, configJson: received.configJson, credentialNames: names.sort(), patch: this.#withCredentialFiles(patch, names) };
  }

  /** Records a snapshot that is now running as the last good one and removes credential files it no longer uses. */
  async commit(snapshot: PreparedSnapshot): Promise<void> {
    const file: SnapshotFile = {
      version: snapshot.version,
      source: snapshot.source,
      configJson: snapshot.configJson,
      credentialNames: snapshot.credentialNames,
      savedAt: new Date().toISOString(),
    };
    await mkdir(this.stateDir, { recursive: true, mode: 0o700 });
    await atomicWrite(this.snapshotFile, Buffer.from(JSON.stringify(file, null, 2)));
    for (const name of CREDENTIAL_FILES.keys()) {
      if (!snapshot.credentialNames.includes(name)) await rm(this.credentialFile(name)!, { force: true });
    }
    const kept = new Set(snapshot.credentialNames.map((name) => this.credentialFile(name)));
    const present = await readdir(this.credentialsDir).catch(() => [] as string[]);
    for (const file of present) {
      const path = join(this.credentialsDir, file);
      const owned = file.startsWith(AUDIT_FILE_PREFIX) || file.startsWith(ROUTE_FILE_PREFIX) || file.startsWith(ENDPOINT_FILE_PREFIX);
      if (owned && !kept.has(path)) await rm(path, { force: true });
    }
  }

  /** The last good snapshot from disk, or undefined when there is none or it can no longer be used. */
  async load(): Promise<PreparedSnapshot | undefined> {
    let text: string;
    try {
      text = await readFile(this.snapshotFile, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      this.#logger.warn({ file: this.snapshotFile, err: (error as Error).message }, 'cannot read cached config snapshot');
      return undefined;
    }
    try {
      const saved = JSON.parse(text) as SnapshotFile;
      if (typeof saved.version !== 'string' || typeof saved.configJson !== 'string' || !Array.isArray(saved.credentialNames)) {
        throw new Error('not a snapshot file');
      }
      const patch = this.#validate(saved.configJson);
      for (const name of saved.credentialNames) await readFile(this.credentialFile(name) ?? '');
      return {
        version: saved.version,
        source: saved.source ?? '',
        configJson: saved.configJson,
        credentialNames: saved.credentialNames,
        patch: this.#withCredentialFiles(patch, saved.credentialNames),
      };
    } catch (error) {
      this.#logger.warn({ file: this.snapshotFile, err: (error as Error).message }, 'ignoring unusable cached config snapshot');
      return undefined;
    }
  }

  #validate(configJson: string): RuntimeConfigPatch {
    let input: unknown;
    try {
      input = JSON.parse(configJson);
    } catch (error) {
      throw new SnapshotRejectedError(`config_json is not valid JSON: ${(error as Error).message}`);
    }
    try {
      return parseRuntimeConfigPatch(input);
    } catch (error) {
      if (error instanceof ConfigError) throw new SnapshotRejectedError(error.message);
      throw error;
    }
  }

  #withCredentialFiles(patch: RuntimeConfigPatch, names: readonly string[]): RuntimeConfigPatch {
    const credentials = this.#builtInFiles(patch.credentials, names);
    let withFiles = patch.routes ? { ...patch, routes: patch.routes.map((route) => this.#withRouteFiles(route, names)) } : patch;
    withFiles = patch.upstreams ? { ...withFiles, upstreams: this.#withUpstreamFiles(patch.upstreams, names) } : withFiles;
    withFiles = patch.audit ? { ...withFiles, audit: this.#withAuditFiles(patch.audit, names) } : withFiles;
    for (const kind of STORAGE_CREDENTIAL_KINDS) {
      const name = storageCredentialName(kind);
      if (names.includes(name)) {
        withFiles = { ...withFiles, storage: { ...withFiles.storage, [kind]: { ...withFiles.storage?.[kind], credentialsFile: this.credentialFile(name)! } } };
      }
    }
    return Object.keys(credentials).length ? { ...withFiles, credentials } : withFiles;
  }

  /**
   * Points the credentials.*File settings at the files of the built-in credentials' secrets the operator sent,
   * from the credential table; secrets that only work together (AWS's key pair) are used only together.
   */
  #builtInFiles(base: CredentialsConfig | undefined, names: readonly string[]): CredentialsConfig {
    const credentials: Record<string, string> = { ...base };
    for (const credential of Object.values(BUILT_IN_CREDENTIALS)) {
      const secrets = credential.secrets as Readonly<Record<string, CredentialSecret>>;
      const together = CREDENTIAL_KINDS[credential.definition.kind].together ?? [];
      if (together.some((role) => !names.includes(secrets[role]!.snapshot))) continue;
      for (const secret of Object.values(secrets)) if (names.includes(secret.snapshot)) credentials[secret.setting] = this.credentialFile(secret.snapshot)!;
    }
    return credentials;
  }

  /** Points a configured route's credential, and its endpoints' own, at the files of the secrets the operator sent for them. */
  #withRouteFiles(route: RouteEntry, names: readonly string[]): RouteEntry {
    const fields = CREDENTIAL_KINDS[route.credential.kind].secrets;
    const credential: Record<string, unknown> = { ...route.credential };
    for (const [role, field] of Object.entries(fields)) {
      const name = `route.${route.name}.${role}`;
      if (names.includes(name)) credential[field] = this.credentialFile(name)!;
    }
    const endpoints = route.endpoints?.map((endpoint) => this.#withEndpointFiles(route.name, route.credential.kind, endpoint, names));
    return { ...route, credential: credential as unknown as RouteEntry['credential'], ...(endpoints ? { endpoints } : {}) };
  }

  /** The built-in routes' endpoints, each pointed at the files of its own secrets (their kind is the route's built-in credential's). */
  #withUpstreamFiles(upstreams: NonNullable<RuntimeConfigPatch['upstreams']>, names: readonly string[]): NonNullable<RuntimeConfigPatch['upstreams']> {
    const out: Partial<Record<RouteName, UpstreamConfig>> = {};
    for (const [route, upstream] of Object.entries(upstreams) as [RouteName, UpstreamConfig][]) {
      const kind = BUILT_IN_CREDENTIALS[ROUTES[route].credential].definition.kind;
      out[route] = upstream.endpoints ? { ...upstream, endpoints: upstream.endpoints.map((endpoint) => this.#withEndpointFiles(route, kind, endpoint, names)) } : upstream;
    }
    return out;
  }

  /** An endpoint with its own credential's files, from the secrets the operator sent as `route.<route>.<endpoint>.<role>`. */
  #withEndpointFiles(route: string, kind: CredentialKindName, endpoint: RouteEndpoint, names: readonly string[]): RouteEndpoint {
    const files: Record<string, string> = {};
    for (const [role, field] of Object.entries(CREDENTIAL_KINDS[kind].secrets)) {
      const name = endpointSecretName(route, endpoint.name, role);
      if (names.includes(name)) files[field] = this.credentialFile(name)!;
    }
    return Object.keys(files).length === 0 ? endpoint : { ...endpoint, credential: { ...endpoint.credential, ...files } };
  }

  /** Points each audit sink at the files of the secrets the operator sent for it. */
  #withAuditFiles(audit: NonNullable<RuntimeConfigPatch['audit']>, names: readonly string[]): NonNullable<RuntimeConfigPatch['audit']> {
    const file = (sink: string, field: AuditCredentialField) =>
      names.includes(auditCredentialName(sink, field)) ? this.credentialFile(auditCredentialName(sink, field)) : undefined;
    return {
      ...audit,
      sinks: audit.sinks.map((sink) => {
        if (sink.kind === 'grpc') {
          const token = file(sink.name, 'bearerToken');
          const ca = file(sink.name, 'caCertificate');
          return { ...sink, ...(token ? { bearerTokenFile: token } : {}), ...(ca ? { tls: { ...sink.tls, caFile: ca } } : {}) };
        }
        if (sink.kind === 'bigquery') {
          const key = file(sink.name, 'credentials');
          return key ? { ...sink, credentialsFile: key } : sink;
        }
        return sink;
      }),
    };
  }
}

async function atomicWrite(path: string, content: Buffer): Promise<void> {
  const tmp = `${path}.${process.pid}.${Date.now()}.tmp`;
  try {
    await writeFile(tmp, content, { mode: 0o600 });
    await chmod(tmp, 0o600);
    await rename(tmp, path);
  } catch (error) {
    await rm(tmp, { force: true });
    throw error;
  }
}

/** Unchanged files are left alone so the file watchers of the credential providers do not fire for nothing. */
async function writeIfChanged(path: string, content: Buffer): Promise<void> {
  try {
    if ((await readFile(path)).equals(content)) return;
  } catch {
    // absent: write it
  }
  await atomicWrite(path, content);
}
