// Spans in a Firestore collection (storage.kind: firestore), through @google-cloud/firestore: one document per
// span, its id the span id (a retried batch overwrites rather than doubles), its fields the column names of
// every other store, start_time a Firestore timestamp (usable by a TTL policy). Firestore has no schema: a
// newer version's fields are simply written, and an older document that lacks them reads back with the
// column's default (span-columns.ts).
//
// The spend report reads the window's documents projected onto the three fields it needs and sums them here,
// in integer cost units: Firestore's aggregation queries have no GROUP BY, and their sum of doubles is not
// exact (ADR 0403). The client retries a failed commit for up to ten minutes on its own; every call here has
// a deadline instead, so the span writer's backoff decides and a dead database never holds a batch for long.

import { Firestore, Timestamp, type DocumentData } from '@google-cloud/firestore';
import type { Logger } from 'pino';
import { recordToSpan, spanToRecord } from './span-columns.ts';
import { type SpanStore, SpanStoreWriteError } from './span-store.ts';
import { SPEND_GROUPS, SpendAccumulator } from './spend.ts';

export interface FirestoreStorageSettings {
  /** Else the project of the credentials (ADC), or of FIRESTORE_EMULATOR_HOST's emulator. */
  projectId?: string;
  /** Default `(default)`. */
  databaseId?: string;
  collection: string;
  /** A service account key file (JSON); else Application Default Credentials. */
  credentialsFile?: string;
}

export interface FirestoreSpanStoreOptions {
  logger: Logger;
  /** Longest a commit or a query may take, milliseconds. */
  timeoutMs?: number;
}

/** A commit holds at most 500 writes. */
const MAX_WRITES_PER_COMMIT = 500;
// gRPC status codes worth another try: CANCELLED, UNKNOWN, DEADLINE_EXCEEDED, PERMISSION_DENIED (IAM
// bindings take minutes to apply), RESOURCE_EXHAUSTED, ABORTED, INTERNAL, UNAVAILABLE, UNAUTHENTICATED.
const RETRYABLE_GRPC = new Set([1, 2, 4, 7, 8, 10, 13, 14, 16]);

class DeadlineError extends Error {}

/** Settles like `work`, or rejects after `ms`; the work itself goes on (a commit is idempotent here). */
function withDeadline<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  work.catch(() => undefined); // a late failure after the deadline is nobody's to handle
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new DeadlineError(`${what} took longer than ${ms} ms`)), ms);
    work.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}

function toDocument(record: ReturnType<typeof spanToRecord>): DocumentData {
  return { ...record, start_time: Timestamp.fromDate(new Date(record.start_time)) };
}

function fromDocument(data: DocumentData): ReturnType<typeof recordToSpan> {
  const start = data.start_time as Timestamp | string | undefined;
  return recordToSpan({ ...data, start_time: start instanceof Timestamp ? start.toDate().toISOString() : start });
}

export function openFirestoreSpanStore(settings: FirestoreStorageSettings, options: FirestoreSpanStoreOptions): SpanStore {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const db = new Firestore({
    ...(settings.projectId ? { projectId: settings.projectId } : {}),
    ...(settings.databaseId ? { databaseId: settings.databaseId } : {}),
    ...(settings.credentialsFile ? { keyFilename: settings.credentialsFile } : {}),
  });
  const collection = db.collection(settings.collection);
  const where = `collection ${settings.collection}`;

  return {
    async insertBatch(spans) {
      for (let i = 0; i < spans.length; i += MAX_WRITES_PER_COMMIT) {
        const batch = db.batch();
        for (const span of spans.slice(i, i + MAX_WRITES_PER_COMMIT)) batch.set(collection.doc(span.spanId), toDocument(spanToRecord(span)));
        try {
          await withDeadline(batch.commit(), timeoutMs, `a commit to ${where}`);
        } catch (error) {
          const code = (error as { code?: unknown }).code;
          const retryable = error instanceof DeadlineError || typeof code !== 'number' || RETRYABLE_GRPC.has(code);
          throw new SpanStoreWriteError(`Firestore write to ${where} failed: ${(error as Error).message}`, retryable, { cause: error });
        }
      }
    },
    async recent(limit) {
      const n = Math.max(0, Math.trunc(limit));
      if (n === 0) return [];
      const snapshot = await withDeadline(collection.orderBy('start_time', 'desc').limit(n).get(), timeoutMs, `a query of ${where}`);
      return snapshot.docs.map((doc) => fromDocument(doc.data()));
    },
    async count() {
      const snapshot = await withDeadline(collection.count().get(), timeoutMs, `a count of ${where}`);
      return snapshot.data().count;
    },
    async spend(query) {
      const column = SPEND_GROUPS[query.groupBy];
      let window = collection.where('start_time', '>=', Timestamp.fromDate(query.since));
      if (query.until) window = window.where('start_time', '<', Timestamp.fromDate(query.until));
      const totals = new SpendAccumulator(query);
      const read = (async () => {
        // Only the fields the report needs travel: one document read per span in the window.
        for await (const doc of window.select(column, 'gen_ai_cost_usd', 'gen_ai_total_tokens', 'start_time', 'attempt').stream()) {
          const data = (doc as unknown as { data(): DocumentData }).data();
          // An attempt's span is a child of its call's, with no cost: a call is counted once.
          if (data.attempt !== undefined && data.attempt !== null) continue;
          const start = (data.start_time as Timestamp).toDate();
          const key: unknown = data[column];
          totals.add(start, typeof key === 'string' ? key : null, Number(data.gen_ai_cost_usd ?? 0), Number(data.gen_ai_total_tokens ?? 0));
        }
      })();
      await withDeadline(read, timeoutMs * 3, `the spend query of ${where}`);
      return totals.report();
    },
    async close() {
      await db.terminate();
    },
  };
}
