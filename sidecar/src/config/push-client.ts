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
import { type AuditReport, AUTHORIZATION, configPushService, MAX_SNAPSHOT_BYTES, type OperatorMessage, type SidecarMessage } from '../../../contracts/push-protocol.ts';
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
  /** Reconnect delays; default 500 ms doubling to 30 s, with jitter. */
  reconnect?: { baseMs: number; maxMs: number };
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

export function startPushClient(opts: PushClientOptions): PushClient {
  const logger = opts.logger.child({ component: 'config-push' });
  const cache = new SnapshotCache(opts.stateDir, logger);
  const reconnect = opts.reconnect ?? { baseMs: 500, maxMs: 30_000 };
  const abort = new AbortController();
  const status: PushClientStatus = { connected: false, fromCache: false, connects: 0 };
  let running: PreparedSnapshot | undefined;
  let stream: Stream | undefined;
  let client: grpc.Client | undefined;

  const ready = (async () => {
    const cached = await cache.load();
    if (!cached || abort.signal.aborted) return;
    opts.store.setLayer('operator', cached.patch);
    running = cached;
    Object.assign(status, { version: cached.version, source: cached.source, fromCache: true });
    logger.info({ version: cached.version, source: cached.source || '(built-in)' }, 'running cached config snapshot until the operator answers');
  })();

  const apply = async (s: NonNullable<OperatorMessage['snapshot']>, reply: (m: SidecarMessage) => void): Promise<void> => {
    const received = { version: s.version, source: s.source, configJson: s.configJson, credentials: s.credentials ?? {} };
    if (running && running.version === received.version) {
      status.fromCache = false;
      reply({ ack: { version: received.version } });
      return;
    }
    try {
      const prepared = await cache.prepare(received);
      opts.store.setLayer('operator', prepared.patch);
      running = prepared;
      await cache
        .commit(prepared)
        .catch((error: unknown) => logger.warn({ err: (error as Error).message }, 'config snapshot applied but not saved; a restart without the operator would use an older one'));
      Object.assign(status, { version: prepared.version, source: prepared.source, fromCache: false });
      logger.info({ version: prepared.version, source: prepared.source || '(built-in)', credentials: prepared.credentialNames }, 'config snapshot applied');
      reply({ ack: { version: received.version } });
    } catch (error) {
      const reason = error instanceof SnapshotRejectedError ? error.message : `cannot apply: ${(error as Error).message}`;
      status.lastRejected = { version: received.version, reason };
      logger.warn({ version: received.version, reason, running: running?.version }, 'config snapshot rejected; keeping the last good one');
      reply({ nack: { version: received.version, reason } });
    }
  };

  /** One stream, from connect until it ends; resolves whether it ended well or not. */
  const connectOnce = (): Promise<boolean> =>
    new Promise((resolve) => {
      let delivered = false;
      let ca: Buffer;
      let token: string;
      try {
        ca = readFileSync(opts.caFile);
        token = readFileSync(opts.tokenFile, 'utf8').trim();
      } catch (error) {
        status.lastError = (error as Error).message;
        logger.warn({ err: status.lastError }, 'cannot read the operator CA or the service-account token');
        resolve(false);
        return;
      }
      const Service = configPushService();
      client = new Service(opts.address, grpc.credentials.createSsl(ca), {
        'grpc.max_receive_message_length': MAX_SNAPSHOT_BYTES,
        // Notices an operator that vanished without closing the connection (node failure).
        'grpc.keepalive_time_ms': 30_000,
        'grpc.keepalive_timeout_ms': 10_000,
      });
      // A connect to an address that no longer answers (the Service still routing to a deleted operator pod, a
      // SYN nobody refuses) can hang in TCP for minutes with no error to retry on: a channel still connecting
      // after the connect timeout is given up and dialled again. A channel that failed opens the stream anyway,
      // which then ends with the failure's cause; once connected, an operator may stay silent as long as it
      // likes (a sidecar bound to a ProxyConfig that is not Ready gets nothing until it is).
      const connectTimeoutMs = opts.connectTimeoutMs ?? 20_000;
      const deadline = Date.now() + connectTimeoutMs;
      const channel = client.getChannel();
      const whenConnected = (): void => {
        if (abort.signal.aborted) {
          resolve(false);
          return;
        }
        const state = channel.getConnectivityState(true);
        if (state !== grpc.connectivityState.IDLE && state !== grpc.connectivityState.CONNECTING) {
          openStream();
          return;
        }
        channel.watchConnectivityState(state, deadline, (error?: Error) => {
          if (!error) {
            whenConnected();
            return;
          }
          status.lastError = `cannot connect to the operator within ${connectTimeoutMs} ms`;
          logger.warn({ address: opts.address, err: status.lastError }, 'config push stream failed');
          client?.close();
          resolve(false);
        });
      };
      whenConnected();

      function openStream(): void {
        const metadata = new grpc.Metadata();
        metadata.set(AUTHORIZATION, `Bearer ${token}`);
        const call = (client as unknown as { stream(md: grpc.Metadata): Stream }).stream(metadata);
        stream = call;
        status.connects += 1;
        let chain = Promise.resolve();
        const reply = (message: SidecarMessage) => {
          if (!call.writableEnded && !call.destroyed) call.write(message);
        };
        let budgetsAttached = false;
        call.on('data', (message: OperatorMessage) => {
          // The operator's first message means it has authenticated and registered the stream: spend reports
          // sent before that would be ignored.
          if (!budgetsAttached) {
            budgetsAttached = true;
            opts.budgets?.attached(reply);
          }
          if (message.budgetState) {
            opts.budgets?.budgetState(message.budgetState);
            return;
          }
          if (message.spendAck) {
            opts.budgets?.spendAck(Number(message.spendAck.sequence));
            return;
          }
          if (!message.snapshot) return;
          delivered = true;
          status.connected = true;
          status.lastError = undefined;
          const snapshot = message.snapshot;
          // One snapshot at a time, in order: a newer one never races an older one onto disk.
          chain = chain.then(() => apply(snapshot, reply));
        });
        // 'status' comes exactly once per call, whatever ended it; 'error' only needs a listener.
        call.on('error', () => undefined);
        call.on('status', (outcome: grpc.StatusObject) => {
          clearInterval(reportTimer);
          opts.budgets?.detached();
          status.connected = false;
          if (abort.signal.aborted) {
            // stopping: not an error
          } else if (outcome.code !== grpc.status.OK) {
            status.lastError = `${grpc.status[outcome.code] ?? outcome.code}: ${outcome.details}`;
            logger.warn({ address: opts.address, err: status.lastError }, 'config push stream failed');
          } else if (!delivered) {
            status.lastError = 'stream closed before any snapshot';
          }
          stream = undefined;
          client?.close();
          void chain.then(() => resolve(delivered));
        });
        let lastReport = '';
        const reportTimer = opts.auditReport
          ? setInterval(() => {
              const report = opts.auditReport!();
              const text = JSON.stringify(report ?? null);
              if (!report || text === lastReport || !status.connected) return;
              lastReport = text;
              reply({ auditReport: report });
            }, opts.reportIntervalMs ?? 10_000)
          : undefined;
        call.on('close', () => clearInterval(reportTimer));
        call.write({
          hello: {
            podName: opts.podName ?? '',
            podNamespace: opts.podNamespace ?? '',
            currentVersion: running?.version ?? '',
            sidecarVersion: opts.sidecarVersion ?? '',
          },
        });
      }
    });

  const loop = (async () => {
    await ready.catch((error: unknown) => logger.warn({ err: (error as Error).message }, 'cannot load cached config snapshot'));
    let failures = 0;
    while (!abort.signal.aborted) {
      const delivered = await connectOnce();
      if (abort.signal.aborted) break;
      // A stream that delivered config was healthy: start the backoff over.
      failures = delivered ? 1 : failures + 1;
      const cap = Math.min(reconnect.maxMs, reconnect.baseMs * 2 ** (failures - 1));
      const delay = Math.round(cap / 2 + (Math.random() * cap) / 2);
      logger.debug({ retryInMs: delay }, 'reconnecting to the operator');
      await sleep(delay, undefined, { signal: abort.signal }).catch(() => undefined);
    }
  })();

  return {
    ready,
    status: () => ({ ...status, ...(status.lastRejected ? { lastRejected: { ...status.lastRejected } } : {}) }),
    async stop() {
      abort.abort();
      stream?.cancel();
      client?.close();
      await loop;
    },
  };
}
