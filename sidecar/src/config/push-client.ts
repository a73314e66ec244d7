// The sidecar end of the config push (proto/config_push.proto, docs/decisions/0700). It starts from the last
// good snapshot on disk, keeps one TLS stream open to the operator, authenticates with the pod's projected
// service-account token (re-read on every connect, since the kubelet rotates it), applies each snapshot to
// the 'operator' layer of the ConfigStore without a restart (requests in flight keep the config they
// started with), acknowledges it or rejects it with the reason, and reconnects with capped, jittered backoff.

import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type { BudgetLink } from '../budgets/cluster-budgets.ts';
import type { ConfigStore } from './config-store.ts';
import {
  type AliasHealthReportMessage,
  type AuditReport,
  AUTHORIZATION,
  BYPASS_REPORT_LIMITS,
  type BypassEntryMessage,
  configPushService,
  MAX_SNAPSHOT_BYTES,
  type OperatorMessage,
  type SidecarMessage,
} from '../../../contracts/push-protocol.ts';
import { CONFIG_REVISION } from '../../../contracts/config-revisions.ts';
import { type PreparedSnapshot, SnapshotCache, SnapshotRejectedError } from './snapshot-cache.ts';

export interface PushClientOptions {
  /** host:port of the operator's push server (TOLLGATE_OPERATOR_ADDRESS). */
  address: string;
  /** PEM of the CA that signed the operator's certificate (TOLLGATE_OPERATOR_CA_FILE). */
  caFile: string;
  /** Projected service-account token, audience tollgate (TOLLGATE_TOKEN_FILE). */
  tokenFile: string;
  /** Snapshot cache and credential files (TOLLGATE_STATE_DIR). */
  stateDir: string;
  store: ConfigStore;
  logger: Logger;
  /** Hints for the operator's logs (TOLLGATE_POD_NAME / TOLLGATE_POD_NAMESPACE); identity comes from the token. */
  podName?: string;
  podNamespace?: string;
  sidecarVersion?: string;
  /** The audit fan-out's delivery, sent every reportIntervalMs when it changed (undefined: nothing to report). */
  auditReport?: () => AuditReport | undefined;
  reportIntervalMs?: number;
  /**
   * The model aliases' health (undefined: the config has none), looked at every aliasReportIntervalMs (default 5 s)
   * and sent when it changed, or when aliasReportRefreshMs (default 60 s) passed since the last one (ADR 0724).
   */
  aliasHealthReport?: () => AliasHealthReportMessage | undefined;
  aliasReportIntervalMs?: number;
  aliasReportRefreshMs?: number;
  /**
   * Bypass entries waiting for the operator (ADR 1605): taken, at most BYPASS_REPORT_LIMITS.entries at a time, every
   * bypassReportIntervalMs (default 5 s) while the stream is registered; left in their queue while it is not.
   */
  bypassReports?: { take(max: number): BypassEntryMessage[] };
  bypassReportIntervalMs?: number;
  /** Reconnect delays (DEFAULT_RECONNECT): doubling from baseMs to maxMs, to refusedMaxMs after the operator refused the stream. */
  reconnect?: ReconnectPolicy;
  /** How long a connect to the operator may take before it is given up and tried again (default 20 s). */
  connectTimeoutMs?: number;
  /** Budget state from the operator and spend reports to it (sidecar/src/budgets/cluster-budgets.ts). */
  budgets?: BudgetLink;
}

export interface PushClientStatus {
  /** A stream to the operator is open and has delivered at least one snapshot. */
  connected: boolean;
  /** Version of the snapshot running now, if any. */
  version?: string;
  /** ProxyConfig it came from (`namespace/name`; '' for built-in defaults). */
  source?: string;
  /** The running snapshot was loaded from disk and not yet confirmed by the operator. */
  fromCache: boolean;
  lastError?: string | undefined;
  lastRejected?: { version: string; reason: string };
  connects: number;
}

export interface PushClient {
  /** Resolves once the cached snapshot (if any) has been applied. */
  ready: Promise<void>;
  status(): PushClientStatus;
  stop(): Promise<void>;
}

type Stream = grpc.ClientDuplexStream<SidecarMessage, OperatorMessage>;
type Reply = (message: SidecarMessage) => void;

export function startPushClient(opts: PushClientOptions): PushClient {
  const logger = opts.logger.child({ component: 'config-push' });
  const abort = new AbortController();
  const snapshots = new SnapshotApplier(opts.store, new SnapshotCache(opts.stateDir, logger), logger);
  const ready = snapshots.loadCached(abort.signal);
  const connection: Connection = { opts, logger, abort: abort.signal, snapshots };
  const loop = (async () => {
    await ready.catch((error: unknown) => logger.warn({ err: (error as Error).message }, 'cannot load cached config snapshot'));
    await reconnectLoop(connection);
  })();
  return {
    ready,
    status: () => snapshots.statusCopy(),
    async stop() {
      abort.abort();
      connection.stream?.cancel();
      connection.client?.close();
      await loop;
    },
  };
}

/** The snapshot running now, and what the operator is told about each one received. */
class SnapshotApplier {
  readonly status: PushClientStatus = { connected: false, fromCache: false, connects: 0 };
  running: PreparedSnapshot | undefined;
  readonly #store: ConfigStore;
  readonly #cache: SnapshotCache;
  readonly #logger: Logger;

  constructor(store: ConfigStore, cache: SnapshotCache, logger: Logger) {
    this.#store = store;
    this.#cache = cache;
    this.#logger = logger;
  }

  /** Runs the last good snapshot from disk, if any, until the operator answers. */
  async loadCached(signal: AbortSignal): Promise<void> {
    const cached = await this.#cache.load();
    if (!cached || signal.aborted) return;
    this.#store.setLayer('operator', cached.patch);
    this.running = cached;
    Object.assign(this.status, { version: cached.version, source: cached.source, fromCache: true });
    this.#logger.info({ version: cached.version, source: cached.source || '(built-in)' }, 'running cached config snapshot until the operator answers');
  }

  /** Applies a snapshot and acknowledges it, or rejects it with the reason and keeps the last good one. */
  async apply(s: NonNullable<OperatorMessage['snapshot']>, reply: Reply): Promise<void> {
    const received = { version: s.version, source: s.source, configJson: s.configJson, credentials: s.credentials ?? {} };
    if (this.running && this.running.version === received.version) {
      this.status.fromCache = false;
      reply({ ack: { version: received.version } });
      return;
    }
    try {
      const prepared = await this.#cache.prepare(received);
      this.#store.setLayer('operator', prepared.patch);
      this.running = prepared;
      await this.#cache
        .commit(prepared)
        .catch((error: unknown) =>
          this.#logger.warn({ err: (error as Error).message }, 'config snapshot applied but not saved; a restart without the operator would use an older one'),
        );
      Object.assign(this.status, { version: prepared.version, source: prepared.source, fromCache: false });
      this.#logger.info({ version: prepared.version, source: prepared.source || '(built-in)', credentials: prepared.credentialNames }, 'config snapshot applied');
      reply({ ack: { version: received.version } });
    } catch (error) {
      const reason = error instanceof SnapshotRejectedError ? error.message : `cannot apply: ${(error as Error).message}`;
      this.status.lastRejected = { version: received.version, reason };
      this.#logger.warn({ version: received.version, reason, running: this.running?.version }, 'config snapshot rejected; keeping the last good one');
      reply({ nack: { version: received.version, reason } });
    }
  }

  statusCopy(): PushClientStatus {
    const { status } = this;
    return { ...status, ...(status.lastRejected ? { lastRejected: { ...status.lastRejected } } : {}) };
  }
}

/** The client's link to the operator: what stop() must close, and what every stream reports to. */
interface Connection {
  readonly opts: PushClientOptions;
  readonly logger: Logger;
  readonly abort: AbortSignal;
  readonly snapshots: SnapshotApplier;
  client?: grpc.Client | undefined;
  stream?: Stream | undefined;
}

/** Connects again and again until stopped, with capped, jittered backoff; a stream that delivered config starts it over. */
async function reconnectLoop(connection: Connection): Promise<void> {
  const { opts, logger, abort } = connection;
  const reconnect = opts.reconnect ?? DEFAULT_RECONNECT;
  let failures = 0;
  while (!abort.aborted) {
    const outcome = await connectOnce(connection);
    if (abort.aborted) break;
    failures = outcome === 'delivered' ? 1 : failures + 1;
    const delay = reconnectDelay(reconnect, failures, outcome);
    logger.debug({ retryInMs: delay }, 'reconnecting to the operator');
    await sleep(delay, undefined, { signal: abort }).catch(() => undefined);
  }
}

export interface ReconnectPolicy {
  baseMs: number;
  maxMs: number;
  refusedMaxMs?: number;
}

/**
 * How a stream ended, for the next delay: it delivered config (the operator went away: a new leader is coming);
 * the operator could not be reached or was unavailable (a retry costs the API server nothing); or it refused
 * the stream (each try costs a TokenReview, and trying again soon cures nothing).
 */
export type StreamOutcome = 'delivered' | 'unreachable' | 'refused';

/**
 * Reconnect delays (ADR 0700, measured in BENCHMARKS.md "The control plane at scale"): 500 ms doubling to 8 s
 * while the operator is unreachable, so every sidecar finds a new leader within seconds of it listening; to
 * 60 s after a refusal.
 */
export const DEFAULT_RECONNECT: Required<ReconnectPolicy> = { baseMs: 500, maxMs: 8_000, refusedMaxMs: 60_000 };

const REFUSALS = new Set<grpc.status>([grpc.status.UNAUTHENTICATED, grpc.status.PERMISSION_DENIED, grpc.status.INVALID_ARGUMENT, grpc.status.RESOURCE_EXHAUSTED]);

export function streamOutcome(code: grpc.status, delivered: boolean): StreamOutcome {
  if (delivered) return 'delivered';
  return REFUSALS.has(code) ? 'refused' : 'unreachable';
}

/** Delay before reconnect number `failures` (1: the stream that was up just ended): capped doubling, half of it jittered. */
export function reconnectDelay(policy: ReconnectPolicy, failures: number, outcome: StreamOutcome, random: () => number = Math.random): number {
  const maxMs = outcome === 'refused' ? Math.max(policy.maxMs, policy.refusedMaxMs ?? DEFAULT_RECONNECT.refusedMaxMs) : policy.maxMs;
  const cap = Math.min(maxMs, policy.baseMs * 2 ** (failures - 1));
  return Math.round(cap / 2 + (random() * cap) / 2);
}

/** One stream, from connect until it ends; resolves with how it ended. */
function connectOnce(connection: Connection): Promise<StreamOutcome> {
  const { opts, logger, snapshots } = connection;
  return new Promise((resolve) => {
    let ca: Buffer;
    let token: string;
    try {
      ca = readFileSync(opts.caFile);
      token = readFileSync(opts.tokenFile, 'utf8').trim();
    } catch (error) {
      snapshots.status.lastError = (error as Error).message;
      logger.warn({ err: snapshots.status.lastError }, 'cannot read the operator CA or the service-account token');
      resolve('unreachable');
      return;
    }
    const Service = configPushService();
    const client = new Service(opts.address, grpc.credentials.createSsl(ca), {
      'grpc.max_receive_message_length': MAX_SNAPSHOT_BYTES,
      // Notices an operator that vanished without closing the connection (node failure).
      'grpc.keepalive_time_ms': 30_000,
      'grpc.keepalive_timeout_ms': 10_000,
    });
    connection.client = client;
    whenConnected(connection, client, (connected) => (connected ? openStream(connection, client, token, resolve) : resolve('unreachable')));
  });
}

/**
 * Calls back once the channel is ready (or failed: the stream then ends with the failure's cause). A connect to
 * an address that no longer answers (the Service still routing to a deleted operator pod, a SYN nobody refuses)
 * can hang in TCP for minutes with no error to retry on: a channel still connecting after the connect timeout is
 * given up and dialled again. Once connected, an operator may stay silent as long as it likes (a sidecar bound
 * to a ProxyConfig that is not Ready gets nothing until it is).
 */
function whenConnected(connection: Connection, client: grpc.Client, then: (connected: boolean) => void): void {
  const { opts, logger, snapshots, abort } = connection;
  const connectTimeoutMs = opts.connectTimeoutMs ?? 20_000;
  const deadline = Date.now() + connectTimeoutMs;
  const channel = client.getChannel();
  const check = (): void => {
    if (abort.aborted) return then(false);
    const state = channel.getConnectivityState(true);
    if (state !== grpc.connectivityState.IDLE && state !== grpc.connectivityState.CONNECTING) return then(true);
    channel.watchConnectivityState(state, deadline, (error?: Error) => {
      if (!error) return check();
      snapshots.status.lastError = `cannot connect to the operator within ${connectTimeoutMs} ms`;
      logger.warn({ address: opts.address, err: snapshots.status.lastError }, 'config push stream failed');
      client.close();
      then(false);
    });
  };
  check();
}

/** The stream: hello, then snapshots, budget state and spend acks in; acks, nacks, spend and audit reports out. */
function openStream(connection: Connection, client: grpc.Client, token: string, resolve: (outcome: StreamOutcome) => void): void {
  const { opts, snapshots } = connection;
  const metadata = new grpc.Metadata();
  metadata.set(AUTHORIZATION, `Bearer ${token}`);
  const call = (client as unknown as { stream(md: grpc.Metadata): Stream }).stream(metadata);
  connection.stream = call;
  snapshots.status.connects += 1;
  const reply: Reply = (message) => {
    if (!call.writableEnded && !call.destroyed) call.write(message);
  };
  const received = receiveMessages(connection, reply);
  call.on('data', received.onMessage);
  const reportTimers = [
    reportWhenChanged(connection, opts.auditReport, (auditReport) => reply({ auditReport }), opts.reportIntervalMs ?? 10_000),
    reportWhenChanged(
      connection,
      opts.aliasHealthReport,
      (aliasHealthReport) => reply({ aliasHealthReport }),
      opts.aliasReportIntervalMs ?? 5_000,
      opts.aliasReportRefreshMs ?? 60_000,
    ),
    sendBypassReports(connection, call, reply),
  ];
  const stopReports = () => reportTimers.forEach((timer) => clearInterval(timer));
  // 'status' comes exactly once per call, whatever ended it; 'error' only needs a listener.
  call.on('error', () => undefined);
  call.on('status', (outcome: grpc.StatusObject) => {
    stopReports();
    ended(connection, outcome, received.delivered());
    connection.stream = undefined;
    client.close();
    void received.applied().then(() => resolve(streamOutcome(outcome.code, received.delivered())));
  });
  call.on('close', stopReports);
  call.write({
    hello: {
      podName: opts.podName ?? '',
      podNamespace: opts.podNamespace ?? '',
      currentVersion: snapshots.running?.version ?? '',
      sidecarVersion: opts.sidecarVersion ?? '',
      // The operator leaves out of each snapshot what this revision does not know (ADR 0723).
      configRevision: CONFIG_REVISION,
    },
  });
}

/** What each message from the operator does; snapshots are applied one at a time, in order. */
function receiveMessages(connection: Connection, reply: Reply): { onMessage: (message: OperatorMessage) => void; delivered: () => boolean; applied: () => Promise<void> } {
  const { opts, snapshots } = connection;
  let chain = Promise.resolve();
  let delivered = false;
  let budgetsAttached = false;
  const onMessage = (message: OperatorMessage): void => {
    // The operator's first message means it has authenticated and registered the stream: spend reports
    // sent before that would be ignored.
    if (!budgetsAttached) {
      budgetsAttached = true;
      opts.budgets?.attached(reply);
    }
    if (message.budgetState) return opts.budgets?.budgetState(message.budgetState);
    if (message.spendAck) return opts.budgets?.spendAck(Number(message.spendAck.sequence));
    if (!message.snapshot) return;
    delivered = true;
    snapshots.status.connected = true;
    snapshots.status.lastError = undefined;
    const snapshot = message.snapshot;
    // One snapshot at a time, in order: a newer one never races an older one onto disk.
    chain = chain.then(() => snapshots.apply(snapshot, reply));
  };
  return { onMessage, delivered: () => delivered, applied: () => chain };
}

/** The stream ended: budgets detach, and the status says why unless the client is stopping. */
function ended(connection: Connection, outcome: grpc.StatusObject, delivered: boolean): void {
  const { opts, logger, snapshots, abort } = connection;
  opts.budgets?.detached();
  snapshots.status.connected = false;
  if (abort.aborted) return; // stopping: not an error
  if (outcome.code !== grpc.status.OK) {
    snapshots.status.lastError = `${grpc.status[outcome.code] ?? outcome.code}: ${outcome.details}`;
    logger.warn({ address: opts.address, err: snapshots.status.lastError }, 'config push stream failed');
  } else if (!delivered) {
    snapshots.status.lastError = 'stream closed before any snapshot';
  }
}

/** Sends what the bypass queue holds, while the stream is registered and writable: nothing is taken for a dead stream. */
function sendBypassReports(connection: Connection, call: Stream, reply: Reply): NodeJS.Timeout | undefined {
  const { opts, snapshots } = connection;
  const queue = opts.bypassReports;
  if (!queue) return undefined;
  return setInterval(() => {
    if (!snapshots.status.connected || call.writableEnded || call.destroyed) return;
    const entries = queue.take(BYPASS_REPORT_LIMITS.entries);
    if (entries.length > 0) reply({ bypassReport: { entries } });
  }, opts.bypassReportIntervalMs ?? 5_000);
}

/**
 * Looks at a report every intervalMs while the stream is connected, and sends it when it changed since the last one
 * this stream sent, or when refreshMs has passed since then (the audit report: never unchanged). Nothing while
 * `produce` gives undefined.
 */
function reportWhenChanged<T>(
  connection: Connection,
  produce: (() => T | undefined) | undefined,
  send: (report: T) => void,
  intervalMs: number,
  refreshMs = Number.POSITIVE_INFINITY,
): NodeJS.Timeout | undefined {
  if (!produce) return undefined;
  const { snapshots } = connection;
  let lastReport = '';
  let lastSentAt = 0;
  return setInterval(() => {
    const report = produce();
    if (report === undefined || !snapshots.status.connected) return;
    const text = JSON.stringify(report);
    if (text === lastReport && Date.now() - lastSentAt < refreshMs) return;
    lastReport = text;
    lastSentAt = Date.now();
    send(report);
  }, intervalMs);
}
