// The Firestore span store against the local Firestore emulator (test/emulators/firestore.ts) through the real
// @google-cloud/firestore client: the store contract, one document per span under its span id, and documents
// an older or a newer version wrote.

import { Firestore, Timestamp } from '@google-cloud/firestore';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openFirestoreSpanStore } from '../../sidecar/src/spans/firestore-span-store.ts';
import { sampleSpan } from '../support/sample-span.ts';
import { SPAN_COLUMN_NAMES } from '../../sidecar/src/spans/span-columns.ts';
import { type FirestoreEmulator, startFirestoreEmulator } from '../emulators/firestore.ts';
import { describeSpanStoreConformance } from '../support/span-store-conformance.ts';

const logger = pino({ level: 'silent' });
let emulator: FirestoreEmulator;
let client: Firestore;
let collections = 0;

beforeAll(async () => {
  emulator = await startFirestoreEmulator();
  process.env.FIRESTORE_EMULATOR_HOST = emulator.host;
  client = new Firestore({ projectId: emulator.projectId });
}, 60_000);
afterAll(async () => {
  await client?.terminate();
  await emulator?.stop();
});

const open = (collection: string) => openFirestoreSpanStore({ projectId: emulator.projectId, collection }, { logger });

describeSpanStoreConformance('Firestore (emulator)', () => open(`contract_${++collections}`));

describe('Firestore span store on the emulator', () => {
  it('writes one document per span, its id the span id and its fields the column names; a retried batch overwrites', async () => {
    const store = open('documents');
    const span = sampleSpan();
    await store.insertBatch([span]);
    await store.insertBatch([span]);
    const docs = (await client.collection('documents').get()).docs;
    expect(docs.map((d) => d.id)).toEqual([span.spanId]);
    expect(Object.keys(docs[0]!.data()).sort()).toEqual([...SPAN_COLUMN_NAMES].sort());
    expect(docs[0]!.get('start_time')).toBeInstanceOf(Timestamp);
    expect(docs[0]!.get('gen_ai_cost_usd')).toBe(span.costUsd);
    await store.close();
  });

  it('reads documents an older version wrote (no version 2 fields) with defaults, and documents with fields it does not know', async () => {
    await client
      .collection('mixed')
      .doc('00f067aa0ba902b7')
      .set({
        span_id: '00f067aa0ba902b7',
        trace_id: '4bf92f3577b34da6a3ce929d0e0e4736',
        parent_span_id: null,
        name: 'chat claude-sonnet-4-5',
        start_time: Timestamp.fromDate(new Date('2025-06-01T08:00:00.000Z')),
        duration_ms: 812.5,
        status: 'ok',
        status_code: 200,
        error: null,
        user_id: 'bob',
        route: 'gamma',
        gen_ai_operation_name: 'chat',
        gen_ai_provider_name: 'anthropic',
        gen_ai_request_model: 'claude-sonnet-4-5',
        gen_ai_usage_input_tokens: 1000,
        gen_ai_usage_output_tokens: 200,
        gen_ai_total_tokens: 1200,
        gen_ai_cost_usd: 0.006,
      });
    const newer = sampleSpan({ startTime: '2025-06-03T00:00:00.000Z' });
    await client
      .collection('mixed')
      .doc(newer.spanId)
      .set({
        ...(await import('../../sidecar/src/spans/span-columns.ts')).spanToRecord(newer),
        start_time: Timestamp.fromDate(new Date(newer.startTime)),
        gen_ai_future_tokens: 7,
      });
    const store = open('mixed');
    const fresh = sampleSpan({ startTime: '2025-06-02T00:00:00.000Z', projectId: 'p2' });
    await store.insertBatch([fresh]);
    const [latest, middle, old] = await store.recent(10);
    expect(latest).toEqual(newer);
    expect(middle).toEqual(fresh);
    expect(old).toMatchObject({ spanId: '00f067aa0ba902b7', userId: 'bob', projectId: null, requestId: '', cachedTokens: 0, reasoningTokens: 0, priced: true, costUsd: 0.006 });
    const report = await store.spend({ since: new Date('2025-01-01'), until: null, groupBy: 'project', bucket: null, limit: 10 });
    expect(report.rows.find((r) => r.key === null)).toMatchObject({ calls: 1, cost_usd: 0.006, total_tokens: 1200 });
    await store.close();
  });
});
