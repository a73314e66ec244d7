// Fans each event out to every sink's worker. publish() is synchronous and never waits, so the stream from
// the agent is read continuously (a slow reader makes the agent drop events on its side); each sink's own
// bounded queue absorbs its slowness, and only that sink drops when it is full.

import type { Logger } from 'pino';
import { DeadLetterFile, type DeadLetterSettings } from './dead-letter.ts';
import { SinkWorker, type SinkStatus, type SinkWorkerSettings } from './sink-worker.ts';
import type { AuditSink } from './sinks/audit-sink.ts';
import type { TetragonEvent } from './tetragon-protocol.ts';

export interface AuditRouterOptions {
  sinks: AuditSink[];
  worker: SinkWorkerSettings;
  deadLetter: DeadLetterSettings;
  logger: Logger;
}

/** Per process, across config changes, so a collector sees one increasing sequence per sender. */
let lastSequence = 0;

export class AuditRouter {
  #workers: SinkWorker[];
  #deadLetter: DeadLetterFile;
  #logger: Logger;
  #received = 0;

  constructor(opts: AuditRouterOptions) {
    this.#logger = opts.logger;
    this.#deadLetter = new DeadLetterFile(opts.deadLetter);
    this.#workers = opts.sinks.map((sink) => new SinkWorker(sink, opts.worker, this.#deadLetter, opts.logger));
  }

  /** Events handed to the router so far. */
  get received(): number {
    return this.#received;
  }

  publish(event: TetragonEvent): void {
    this.#received++;
    const record = { sequence: ++lastSequence, receivedAt: Date.now(), event };
    for (const worker of this.#workers) worker.offer(record);
  }

  sinks(): SinkStatus[] {
    return this.#workers.map((w) => w.status());
  }

  /** Drains every sink in parallel until `deadline` (epoch ms); logs and returns the totals per sink. */
  async drain(deadline: number): Promise<SinkStatus[]> {
    await Promise.all(this.#workers.map((w) => w.drain(deadline)));
    await this.#deadLetter.close();
    const totals = this.sinks();
    for (const s of totals) {
      this.#logger.info(
        { sink: s.name, kind: s.kind, received: s.received, delivered: s.delivered, retried: s.retried, dropped: s.dropped, deadLettered: s.deadLettered },
        'audit sink drained',
      );
    }
    return totals;
  }
}
