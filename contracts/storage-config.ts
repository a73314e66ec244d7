// The per-store sections of `storage` (duckdb, bigquery, firestore): types, defaults and validation, beside
// config-schema.ts which checks the rest of the section. Each section is replaced whole by a later config
// layer, like `audit`, so a store's settings always come from one place.

import { ConfigError } from './config-error.ts';
import { definedFields, isRecord } from './json-record.ts';

export const STORAGE_KINDS = ['sqlite', 'memory', 'duckdb', 'bigquery', 'firestore'] as const;
export type StorageKind = (typeof STORAGE_KINDS)[number];

export interface DuckDbStorageConfig {
  /** Default `tollgate.duckdb`, or `$TOLLGATE_STATE_DIR/spans.duckdb` in a pod. */
  path?: string;
}

export interface BigQueryStorageConfig {
  projectId?: string;
  /** Default `tollgate`. */
  dataset?: string;
  /** Default `spans`. */
  table?: string;
  location?: string;
  partitionExpirationDays?: number;
  apiEndpoint?: string;
  /** Service account key file; else Application Default Credentials. */
  credentialsFile?: string;
}

export interface FirestoreStorageConfig {
  projectId?: string;
  /** Default `(default)`. */
  databaseId?: string;
  /** Default `spans`. */
  collection?: string;
  credentialsFile?: string;
}

export const STORAGE_DEFAULTS = {
  duckdbFile: 'tollgate.duckdb',
  duckdbPodFile: 'spans.duckdb',
  bigqueryDataset: 'tollgate',
  bigqueryTable: 'spans',
  firestoreCollection: 'spans',
} as const;

type Obj = Record<string, unknown>;

const GCP_PROJECT = /^[a-z][a-z0-9.:-]{1,127}$/;
const BQ_ID = /^[A-Za-z0-9_]{1,1024}$/;
const BQ_LOCATION = /^[A-Za-z0-9-]{1,64}$/;
const FIRESTORE_DATABASE = /^(\(default\)|[a-z][a-z0-9-]{2,62})$/;
const FIRESTORE_COLLECTION = /^(?!__.*__$)[A-Za-z0-9_-]{1,128}$/;
const HTTP_URL = /^https?:\/\/[^\s/?#@]+(?:\/[^\s?#]*)?$/;

function object(value: unknown, field: string): Obj {
  if (!isRecord(value)) throw new ConfigError(field, 'must be an object');
  return value;
}

function keys(value: Obj, field: string, allowed: readonly string[]): void {
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key)) throw new ConfigError(`${field}.${key}`, `is not a known field (expected one of: ${allowed.join(', ')})`);
  }
}

function str(value: Obj, key: string, field: string, pattern?: RegExp, hint?: string): string | undefined {
  const v = value[key];
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || v.length === 0 || v.length > 4096) throw new ConfigError(`${field}.${key}`, 'must be a non-empty string');
  if (pattern && !pattern.test(v)) throw new ConfigError(`${field}.${key}`, `${hint ?? `must match ${pattern}`} (got ${JSON.stringify(v)})`);
  return v;
}

export function parseDuckDbStorage(input: unknown, field: string): DuckDbStorageConfig {
  const v = object(input, field);
  keys(v, field, ['path']);
  return definedFields({ path: str(v, 'path', field) });
}

export function parseBigQueryStorage(input: unknown, field: string): BigQueryStorageConfig {
  const v = object(input, field);
  keys(v, field, ['projectId', 'dataset', 'table', 'location', 'partitionExpirationDays', 'apiEndpoint', 'credentialsFile']);
  const days = v.partitionExpirationDays;
  if (days !== undefined && (typeof days !== 'number' || !Number.isInteger(days) || days < 1 || days > 36_500)) {
    throw new ConfigError(`${field}.partitionExpirationDays`, `must be an integer at least 1 and at most 36500 (got ${JSON.stringify(days)})`);
  }
  return definedFields({
    projectId: str(v, 'projectId', field, GCP_PROJECT, 'must be a Google Cloud project id'),
    dataset: str(v, 'dataset', field, BQ_ID, 'must be letters, digits and underscores'),
    table: str(v, 'table', field, BQ_ID, 'must be letters, digits and underscores'),
    location: str(v, 'location', field, BQ_LOCATION, 'must be a BigQuery location like US, EU or europe-west1'),
    partitionExpirationDays: days,
    apiEndpoint: str(v, 'apiEndpoint', field, HTTP_URL, 'must be an http(s) URL without query or fragment'),
    credentialsFile: str(v, 'credentialsFile', field),
  });
}

export function parseFirestoreStorage(input: unknown, field: string): FirestoreStorageConfig {
  const v = object(input, field);
  keys(v, field, ['projectId', 'databaseId', 'collection', 'credentialsFile']);
  return definedFields({
    projectId: str(v, 'projectId', field, GCP_PROJECT, 'must be a Google Cloud project id'),
    databaseId: str(v, 'databaseId', field, FIRESTORE_DATABASE, 'must be (default) or a Firestore database id'),
    collection: str(v, 'collection', field, FIRESTORE_COLLECTION, 'must be a collection id of letters, digits, _ and -'),
    credentialsFile: str(v, 'credentialsFile', field),
  });
}
