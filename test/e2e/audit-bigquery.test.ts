// The BigQuery audit sink against a local BigQuery emulator (test/emulators/bigquery.ts), through the real
// @google-cloud/bigquery client: the day-partitioned table is created at start-up, rows carry the event's
// protojson and the agent's exact bytes, and an unreachable warehouse is a retryable write failure.

import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SinkWriteError } from '../../sidecar/src/audit/sinks/audit-sink.ts';
import { BigQuerySink } from '../../sidecar/src/audit/sinks/bigquery-sink.ts';
import { TetragonEvent } from '../../sidecar/src/audit/tetragon-protocol.ts';
import { type BigQueryEmulator, startBigQueryEmulator } from '../emulators/bigquery.ts';
import { mixedEvents } from '../fakes/tetragon-agent.ts';
import { waitFor } from '../support/wait-for.ts';

const logger = pino({ level: 'silent' });

describe('bigquery audit sink on the emulator', () => {
  let bq: BigQueryEmulator;

  beforeAll(async () => {
    bq = await startBigQueryEmulator();
  }, 300_000);

  afterAll(async () => {
    await bq?.stop();
  });

  function sink(table: string) {
    return new BigQuerySink({ name: 'warehouse', projectId: bq.projectId, dataset: 'audit', table, apiEndpoint: bq.endpoint, maxBatch: 100, sender: 'team-a/web-1', logger });
  }

  it('creates the day-partitioned table at start-up and writes one row per event with its protojson and exact bytes', async () => {
    const warehouse = sink('tetragon_events');
    const table = bq.client().dataset('audit').table('tetragon_events');
    // created by the constructor, before any event
    await waitFor('the table', async () => (await table.exists())[0], 10_000);
    const [metadata] = await table.getMetadata();
    expect(metadata.timePartitioning).toMatchObject({ type: 'DAY', field: 'time' });
    expect((metadata.schema.fields as { name: string }[]).map((f) => f.name)).toEqual(
      expect.arrayContaining(['time', 'event_type', 'pod_namespace', 'pod_name', 'exec_id', 'event', 'tetragon_event']),
    );

    const raws = mixedEvents([{ namespace: 'team-a', pod: 'web-1' }], 4, { unknownField: true });
    const records = raws.map((raw, i) => ({ sequence: i + 1, receivedAt: Date.now(), event: new TetragonEvent(raw) }));
    await warehouse.write(records);

    const [rows] = await bq.client().query({ query: 'SELECT sequence, event_type, pod_name, exec_id, event, tetragon_event, sender FROM audit.tetragon_events ORDER BY sequence' });
    expect(rows).toHaveLength(4);
    rows.forEach((row: Record<string, unknown>, i: number) => {
      const event = records[i]!.event;
      expect(row.event_type).toBe(event.info.type);
      expect(row.pod_name).toBe('web-1');
      expect(row.exec_id).toBe(event.info.execId);
      expect(row.sender).toBe('team-a/web-1');
      expect(JSON.parse(row.event as string)).toEqual(JSON.parse(event.json()));
      const bytes = Buffer.isBuffer(row.tetragon_event) ? row.tetragon_event : Buffer.from(String(row.tetragon_event), 'base64');
      expect(bytes.equals(raws[i]!)).toBe(true);
    });
    await warehouse.close();
  });

  it('reports an unreachable warehouse as a retryable write failure, and writes again once it is back', async () => {
    const warehouse = sink('outage');
    const record = { sequence: 1, receivedAt: Date.now(), event: new TetragonEvent(mixedEvents([{ namespace: 'team-a', pod: 'web-1' }], 1)[0]!) };
    await warehouse.write([record]);
    await bq.stop();
    const failure = await warehouse.write([record]).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(SinkWriteError);
    expect((failure as SinkWriteError).retryable).toBe(true);
    await bq.restart();
    // the emulator came back empty: the sink creates dataset and table again and the write succeeds
    await warehouse.write([record]).catch(async () => warehouse.write([record]));
    const [rows] = await bq.client().query({ query: 'SELECT COUNT(*) AS n FROM audit.outage' });
    expect(Number((rows[0] as { n: number }).n)).toBe(1);
  });
});
