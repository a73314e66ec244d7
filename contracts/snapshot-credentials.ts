// The names credential values travel under in a config snapshot (proto Snapshot.credentials keys). The
// operator names each value it resolves from a Secret (operator/src/render.ts, render-audit.ts); the sidecar
// writes each to a file and points its config at it (sidecar/src/config/snapshot-cache.ts). Both spell the
// names from here: a name only one side knows would be a credential the sidecar ignores.

import type { BuiltInSnapshotName, EndpointSecretName, RouteSecretName } from './credential-kinds.ts';

/** The built-in credentials' values (openaiApiKey, awsAccessKeyId, …), from the credential table. */
export type RouteCredentialName = BuiltInSnapshotName;

/** Span stores whose key file travels as a credential (spec.storage.<kind>.credentials). */
export const STORAGE_CREDENTIAL_KINDS = ['bigquery', 'firestore'] as const;
export type StorageCredentialKind = (typeof STORAGE_CREDENTIAL_KINDS)[number];
export type StorageCredentialName = `storage.${StorageCredentialKind}.credentials`;

export function storageCredentialName(kind: StorageCredentialKind): StorageCredentialName {
  return `storage.${kind}.credentials`;
}

/** An audit sink's secrets, named after the sink (`audit.<sink>.<field>`). */
export const AUDIT_CREDENTIAL_FIELDS = ['bearerToken', 'caCertificate', 'credentials'] as const;
export type AuditCredentialField = (typeof AUDIT_CREDENTIAL_FIELDS)[number];
export type AuditCredentialName = `audit.${string}.${AuditCredentialField}`;

export function auditCredentialName(sink: string, field: AuditCredentialField): AuditCredentialName {
  return `audit.${sink}.${field}`;
}

/** A configured route's secrets travel as `route.<name>.<role>`, an endpoint's own as `route.<name>.<endpoint>.<role>` (credential-kinds.ts). */
export type SnapshotCredentialName = RouteCredentialName | RouteSecretName | EndpointSecretName | StorageCredentialName | AuditCredentialName;
