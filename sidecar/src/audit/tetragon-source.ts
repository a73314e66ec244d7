// The client end of Tetragon's GetEvents stream. It keeps one stream open to the node's agent, reconnects
// with capped exponential backoff and full jitter (reset once a stream has delivered an event), and logs the
// stream state as `tetragon audit stream` connected / disconnected (with the reason) / reconnecting. The
// stream is live only, with no replay: events during a gap are lost at the source, so gaps are counted
// (disconnects, time spent disconnected). Reading never pauses: every event goes straight to onEvent.

import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { abortableDelay, type BackoffSettings, fullJitterDelay } from './full-jitter.ts';
import { type GetEventsClient, type GetEventsRequest, getEventsClientConstructor, TetragonEvent } from './tetragon-protocol.ts';

/** `tetra getevents` accepts 10 MiB; grpc-js would refuse anything over 4 MiB. */
export const MAX_EVENT_BYTES = 10 * 1024 * 1024;
/**
 * The agent sets no keepalive policy, so gRPC's default enforcement applies: a ping sooner than 5 minutes
 * after the last one earns a strike, and strikes end in GOAWAY too_many_pings. 6 minutes stays clear of it.
 */
export const KEEPALIVE_TIME_MS = 6 * 60 * 1000;

export interface TetragonSourceOptions {
  /** `unix:///var/run/tetragon/tetragon.sock` or `host:port`. */
  address: string;
  request: GetEventsRequest;
  onEvent(event: TetragonEvent): void;
  logger: Logger;
  reconnect?: BackoffSettings;
  /** At most one line per this interval about events that do not decode; the others are counted into it. */
  undecodableLogIntervalMs?: number;
}

export interface SourceStatus {
  address: string;
  connected: boolean;
  /** Streams opened (headers received). */
  connects: number;
  /** Streams that ended other than by our own stop. */
  disconnects: number;
  /** Total time without an open stream since start, current gap included. */
  disconnectedMs: number;
  eventsReceived: number;
  bytesReceived: number;
  /** Messages that did not decode as GetEventsResponse (dropped and counted). */
  undecodable: number;
  lastDisconnectReason?: string;
  lastEventAt?: string;
}

export function describeStatus(status: grpc.StatusObject | { code: grpc.status; details: string }): string {
  return `${grpc.status[status.code] ?? status.code}: ${status.details || 'no details'}`;
}

export class TetragonSource {
  #opts: TetragonSourceOptions;
  #logger: Logger;
  #abort = new AbortController();
  #client: GetEventsClient | undefined;
  #call: grpc.ClientReadableStream<Buffer> | undefined;
  #status: SourceStatus;
  #disconnectedSince: number | undefined = Date.now();
  #loop: Promise<void> | undefined;
  #undecodableLog = { lastAt: Number.NEGATIVE_INFINITY, suppressed: 0 };

  constructor(opts: TetragonSourceOptions) {
    this.#opts = opts;
    this.#logger = opts.logger;
    this.#status = { address: opts.address, connected: false, connects: 0, disconnects: 0, disconnectedMs: 0, eventsReceived: 0, bytesReceived: 0, undecodable: 0 };
  }

  start(): void {
    this.#loop ??= this.#run();
  }

  status(): SourceStatus {
    const gap = this.#disconnectedSince === undefined ? 0 : Date.now() - this.#disconnectedSince;
    return { ...this.#status, disconnectedMs: this.#status.disconnectedMs + gap };
  }

  /** Ends the stream (our own shutdown: not counted as a disconnect) and waits for the loop to finish. */
  async stop(): Promise<void> {
    this.#abort.abort();
    this.#call?.cancel();
    await this.#loop;
    this.#client?.close();
  }

  async #run(): Promise<void> {
    const backoff = this.#opts.reconnect ?? { initialMs: 250, maxMs: 30_000 };
    let attempt = 0;
    while (!this.#abort.signal.aborted) {
      const delivered = await this.#streamOnce();
      if (this.#abort.signal.aborted) break;
      // A stream that delivered events was healthy: start the backoff over.
      attempt = delivered ? 1 : attempt + 1;
      const delay = fullJitterDelay(backoff, attempt);
      this.#logger.info({ address: this.#opts.address, attempt, retryInMs: delay }, 'tetragon audit stream reconnecting');
      await abortableDelay(delay, this.#abort.signal);
    }
  }

  #connectClient(): GetEventsClient {
    if (this.#client) return this.#client;
    const Client = getEventsClientConstructor();
    this.#client = new Client(this.#opts.address, grpc.credentials.createInsecure(), {
      'grpc.max_receive_message_length': MAX_EVENT_BYTES,
      'grpc.keepalive_time_ms': KEEPALIVE_TIME_MS,
      'grpc.keepalive_timeout_ms': 20_000,
      'grpc.keepalive_permit_without_calls': 0,
      // grpc-js reconnects the channel on its own; our loop decides when to open the next stream.
      'grpc.initial_reconnect_backoff_ms': 250,
      'grpc.max_reconnect_backoff_ms': 5_000,
    }) as unknown as GetEventsClient;
    return this.#client;
  }

  /** A broken agent can send nothing but such events: one line per interval, naming how many it stands for. */
  #logUndecodable(error: Error, bytes: number): void {
    const now = Date.now();
    const log = this.#undecodableLog;
    if (now - log.lastAt < (this.#opts.undecodableLogIntervalMs ?? 10_000)) {
      log.suppressed++;
      return;
    }
    this.#logger.warn(
      { address: this.#opts.address, err: error.message, bytes, undecodable: this.#status.undecodable, suppressed: log.suppressed },
      'tetragon audit stream sent an event that does not decode; dropped',
    );
    this.#undecodableLog = { lastAt: now, suppressed: 0 };
  }

  /** One stream from open to end; resolves true when it delivered at least one event. */
  #streamOnce(): Promise<boolean> {
    return new Promise((resolve) => {
      let delivered = false;
      let opened = false;
      const call = this.#connectClient().getEvents(this.#opts.request);
      this.#call = call;
      const markConnected = () => {
        if (opened) return;
        opened = true;
        this.#status.connects++;
        this.#status.connected = true;
        if (this.#disconnectedSince !== undefined) {
          this.#status.disconnectedMs += Date.now() - this.#disconnectedSince;
          this.#disconnectedSince = undefined;
        }
        this.#logger.info({ address: this.#opts.address, connects: this.#status.connects }, 'tetragon audit stream connected');
      };
      call.on('metadata', markConnected);
      call.on('data', (raw: Buffer) => {
        markConnected();
        delivered = true;
        this.#status.eventsReceived++;
        this.#status.bytesReceived += raw.length;
        this.#status.lastEventAt = new Date().toISOString();
        let event: TetragonEvent;
        try {
          event = new TetragonEvent(raw);
        } catch (error) {
          this.#status.undecodable++;
          this.#logUndecodable(error as Error, raw.length);
          return;
        }
        this.#opts.onEvent(event);
      });
      call.on('error', () => undefined); // the 'status' event carries the outcome
      call.on('status', (status: grpc.StatusObject) => {
        this.#call = undefined;
        const ours = this.#abort.signal.aborted;
        if (opened) {
          this.#status.connected = false;
          this.#disconnectedSince = Date.now();
        }
        if (!ours) {
          // The agent ends streams only by going away: OK, CANCELLED and UNAVAILABLE alike mean reconnect.
          const reason = status.code === grpc.status.OK ? 'OK: the agent ended the stream' : describeStatus(status);
          this.#status.lastDisconnectReason = reason;
          if (opened) this.#status.disconnects++;
          this.#logger.warn(
            { address: this.#opts.address, reason, wasConnected: opened, disconnects: this.#status.disconnects },
            opened ? 'tetragon audit stream disconnected' : 'tetragon audit stream disconnected: could not connect',
          );
        }
        resolve(delivered);
      });
    });
  }
}
