import { describe, expect, it } from 'vitest';
import { parseRuntimeConfigPatch } from './config-schema.ts';

describe('storage sections', () => {
  it('accepts each store kind with its settings', () => {
    expect(
      parseRuntimeConfigPatch({
        storage: {
          kind: 'bigquery',
          bigquery: {
            projectId: 'acme-prod',
            dataset: 'llm_spend',
            table: 'spans',
            location: 'europe-west1',
            partitionExpirationDays: 90,
            apiEndpoint: 'http://127.0.0.1:9050',
            credentialsFile: '/keys/sa.json',
          },
          firestore: { databaseId: '(default)', collection: 'spans' },
          duckdb: { path: '/data/spans.duckdb' },
        },
      }).storage,
    ).toMatchObject({ kind: 'bigquery', bigquery: { dataset: 'llm_spend', partitionExpirationDays: 90 }, duckdb: { path: '/data/spans.duckdb' } });
  });

  it.each([
    [{ kind: 'postgres' }, 'storage.kind must be one of sqlite, memory, duckdb, bigquery, firestore (got "postgres")'],
    [{ bigquery: { dataset: 'a-b' } }, 'storage.bigquery.dataset must be letters, digits and underscores (got "a-b")'],
    [{ bigquery: { partitionExpirationDays: 0 } }, 'storage.bigquery.partitionExpirationDays must be an integer at least 1 and at most 36500 (got 0)'],
    [{ bigquery: { apiEndpoint: 'ftp://x' } }, 'storage.bigquery.apiEndpoint must be an http(s) URL without query or fragment (got "ftp://x")'],
    [
      { bigquery: { tabel: 'x' } },
      'storage.bigquery.tabel is not a known field (expected one of: projectId, dataset, table, location, partitionExpirationDays, apiEndpoint, credentialsFile)',
    ],
    [{ firestore: { collection: '__spans__' } }, 'storage.firestore.collection must be a collection id of letters, digits, _ and - (got "__spans__")'],
    [{ firestore: { databaseId: 'X' } }, 'storage.firestore.databaseId must be (default) or a Firestore database id (got "X")'],
    [{ duckdb: { path: '' } }, 'storage.duckdb.path must be a non-empty string'],
    // storage.path would be ignored and the spans written elsewhere without a word
    [{ kind: 'duckdb', path: 'spans.duckdb' }, 'storage.path is the SQLite file; with kind duckdb set storage.duckdb.path'],
  ])('refuses %j, naming the field', (storage, message) => {
    expect(() => parseRuntimeConfigPatch({ storage })).toThrow(message);
  });
});
