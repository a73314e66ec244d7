// kind: bigquery. One row per event in a table partitioned by day on the event's time, created (with its
// dataset) at start-up when missing. Rows go through tabledata.insertAll with an insertId derived from the
// event's bytes, so a batch retried after a timeout is deduplicated by BigQuery instead of doubled.

import { createHash } from 'node:crypto';
import { BigQuery, type Table, type TableField } from '@google-cloud/bigquery';
import type { Logger } from 'pino';
import type { BigQuerySinkConfig } from '../../../../contracts/audit-config.ts';
import type { AuditRecord, AuditSink } from './audit-sink.ts';
import { SinkWriteError } from './audit-sink.ts';

/** The sink's config section (audit-config.ts) plus what the runtime adds. */
export type BigQuerySinkSettings = Omit<BigQuerySinkConfig, 'kind' | 'batchSize' | 'timeoutMs'> & {
  maxBatch: number;
  sender: string;
  logger: Logger;
};

/** The table's columns; `event` is the protojson line the jsonl sink writes, `tetragon_event` the agent's bytes. */
export const AUDIT_TABLE_SCHEMA: TableField[] = [
  { name: 'time', type: 'TIMESTAMP', mode: 'REQUIRED', description: 'When the agent observed the event (received_time when it carries none)' },
  { name: 'received_time', type: 'TIMESTAMP', mode: 'REQUIRED', description: 'When Tollgate read the event from the agent' },
  { name: 'event_type', type: 'STRING', mode: 'REQUIRED' },
  { name: 'node_name', type: 'STRING' },
  { name: 'pod_namespace', type: 'STRING' },
  { name: 'pod_name', type: 'STRING' },
  { name: 'exec_id', type: 'STRING' },
  { name: 'binary', type: 'STRING' },
  { name: 'sender', type: 'STRING', description: 'The Tollgate sidecar (namespace/pod) or server that forwarded the event' },
  { name: 'sequence', type: 'INT64' },
  { name: 'event', type: 'STRING', description: 'The event as protojson (tetra getevents -o json)' },
  { name: 'tetragon_event', type: 'BYTES', description: 'tetragon.GetEventsResponse as the agent sent it' },
];

const RETRYABLE_HTTP = new Set([408, 429, 500, 502, 503, 504]);

function httpCode(error: unknown): number | undefined {
  const code = (error as { code?: unknown }).code;
  return typeof code === 'number' ? code : undefined;
}

export class BigQuerySink implements AuditSink {
  readonly kind = 'bigquery';
  readonly name: string;
  readonly maxBatch: number;
  #settings: BigQuerySinkSettings;
  #client: BigQuery;
  #table: Promise<Table> | undefined;

  constructor(settings: BigQuerySinkSettings) {
    this.#settings = settings;
    this.name = settings.name;
    this.maxBatch = settings.maxBatch;
    this.#client = new BigQuery({
      ...(settings.projectId ? { projectId: settings.projectId } : {}),
      ...(settings.location ? { location: settings.location } : {}),
      ...(settings.apiEndpoint ? { apiEndpoint: settings.apiEndpoint } : {}),
      ...(settings.credentialsFile ? { keyFilename: settings.credentialsFile } : {}),
      // The sink worker retries with its own backoff and dead-letters; the client's retries would multiply them.
      autoRetry: false,
    });
    // At start-up, not at the first event: a missing permission shows in the logs at once.
    this.#ready().catch((error: unknown) =>
      settings.logger.warn({ sink: this.name, err: (error as Error).message }, 'audit sink write failed: cannot prepare the BigQuery table yet; retrying with the first batch'),
    );
  }

  /** Creates the dataset and the day-partitioned table when missing; retried on the next write when it fails. */
  #ready(): Promise<Table> {
    this.#table ??= (async () => {
      const { dataset: datasetId, table: tableId, location, partitionExpirationDays } = this.#settings;
      const dataset = this.#client.dataset(datasetId);
      const [datasetExists] = await dataset.exists();
      if (!datasetExists) await dataset.create(location ? { location } : {}).catch(ignoreAlreadyExists);
      const table = dataset.table(tableId);
      const [tableExists] = await table.exists();
      if (!tableExists) {
        await table
          .create({
            schema: { fields: AUDIT_TABLE_SCHEMA },
            timePartitioning: {
              type: 'DAY',
              field: 'time',
              ...(partitionExpirationDays ? { expirationMs: String(partitionExpirationDays * 86_400_000) } : {}),
            },
            clustering: { fields: ['pod_namespace', 'event_type'] },
            description: 'Tetragon runtime-security events forwarded by Tollgate (one row per event)',
          })
          .catch(ignoreAlreadyExists);
        this.#settings.logger.info({ sink: this.name, table: `${datasetId}.${tableId}` }, 'audit BigQuery table created');
      }
      return table;
    })();
    this.#table.catch(() => (this.#table = undefined));
    return this.#table;
  }

  async write(batch: readonly AuditRecord[]): Promise<void> {
    let table: Table;
    try {
      table = await this.#ready();
    } catch (error) {
      const code = httpCode(error);
      throw new SinkWriteError(
        `cannot prepare ${this.#settings.dataset}.${this.#settings.table}: ${(error as Error).message}`,
        code === undefined || RETRYABLE_HTTP.has(code) || code === 404,
        { cause: error },
      );
    }
    const rows = batch.map((record) => {
      const { info, raw } = record.event;
      const received = new Date(record.receivedAt).toISOString();
      return {
        insertId: createHash('sha256').update(raw).digest('base64url').slice(0, 32),
        json: {
          time: info.time || received,
          received_time: received,
          event_type: info.type,
          node_name: info.nodeName,
          pod_namespace: info.podNamespace,
          pod_name: info.podName,
          exec_id: info.execId,
          binary: info.binary,
          sender: this.#settings.sender,
          sequence: record.sequence,
          event: record.event.json(),
          tetragon_event: raw.toString('base64'),
        },
      };
    });
    try {
      await table.insert(rows, { raw: true });
    } catch (error) {
      const code = httpCode(error);
      if (code === 404) this.#table = undefined; // the table was deleted: create it again on the retry
      const partial = (error as { name?: string; errors?: { errors?: { reason?: string; message?: string }[] }[] }).errors;
      if ((error as { name?: string }).name === 'PartialFailureError' && partial) {
        const reasons = partial.flatMap((row) => row.errors ?? []);
        const invalid = reasons.some((r) => r.reason === 'invalid');
        const first = reasons.find((r) => r.reason !== 'stopped') ?? reasons[0];
        throw new SinkWriteError(`insertAll rejected rows: ${first?.reason ?? 'unknown'}: ${first?.message ?? ''}`, !invalid, { cause: error });
      }
      throw new SinkWriteError(`insertAll failed: ${(error as Error).message}`, code === undefined || RETRYABLE_HTTP.has(code) || code === 404, { cause: error });
    }
  }

  async close(): Promise<void> {
    // The client holds no connections of its own beyond the shared HTTP agent.
  }
}

function ignoreAlreadyExists(error: unknown): void {
  if (httpCode(error) !== 409) throw error;
}
