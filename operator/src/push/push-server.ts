// The ConfigPush gRPC server (proto/config_push.proto) over TLS. Each stream is authenticated before anything
// is sent: the bearer token goes to the TokenReview API, the pod it is bound to is read for its
// tollgate.dev/proxy-config annotation (and must still be the same pod, by uid), and only then is the
// stream registered. Credentials travel only inside these streams and are never logged.

import { randomUUID } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import {
  type AuditReport,
  AUTHORIZATION,
  configPushService,
  MAX_SNAPSHOT_BYTES,
  type Hello,
  type OperatorMessage,
  type SidecarMessage,
  type SpendReportMessage,
} from '../../../contracts/push-protocol.ts';
import type { BudgetSidecar } from '../budgets/budget-distributor.ts';
import type { BypassEvents } from './bypass-events.ts';
import type { SpendSource } from '../budgets/cluster-ledger.ts';
import { isStatus, type KubeApi } from '../../../kube-client/api-client.ts';
import { PROXY_CONFIG_ANNOTATION } from './config-selection.ts';
import type { SidecarRegistry } from './sidecar-registry.ts';
import type { PodMetadata } from './pod-metadata.ts';
import type { Snapshot } from './snapshot.ts';
import { reviewToken, type SidecarIdentity, UnauthenticatedError } from './token-review.ts';

export interface PushServerOptions {
  api: KubeApi;
  registry: SidecarRegistry;
  logger: Logger;
  host: string;
  /** 0 picks a free port. */
  port: number;
  tls: { certPem: string; keyPem: string };
  /** How long a new stream may take to say Hello. */
  helloTimeoutMs?: number;
  /** Budget state to sidecars and their spend reports (operator/src/budgets). */
  budgets?: BudgetStreams;
  /** The pods' metadata as the informer holds it (`namespace/name`); a pod it does not hold yet is read. */
  pods?: (key: string) => PodMetadata | undefined;
  /** ProviderBypass Events from sidecars' bypass reports (ADR 1605). */
  bypass?: Pick<BypassEvents, 'report'>;
}

export interface BudgetStreams {
  connected(sidecar: BudgetSidecar): void;
  disconnected(id: string): void;
  spendReport(source: SpendSource, report: SpendReportMessage): void;
}

/** Spend report entries per message; a sidecar seals at most 200 (push-protocol.ts). */
const MAX_REPORT_ENTRIES = 1_000;

export interface PushServer {
  port: number;
  stop(): Promise<void>;
}

type Call = grpc.ServerDuplexStream<SidecarMessage, OperatorMessage>;

class StreamError extends Error {
  readonly code: grpc.status;
  constructor(code: grpc.status, message: string) {
    super(message);
    this.code = code;
  }
}

export async function startPushServer(opts: PushServerOptions): Promise<PushServer> {
  const { logger } = opts;
  const calls = new Set<Call>();
  const server = new grpc.Server({
    'grpc.max_send_message_length': MAX_SNAPSHOT_BYTES,
    // Acks, audit, spend and alias health reports; a spend report of 200 entries with the longest ids fits, and a
    // sidecar bounds its alias report below MAX_ALIAS_REPORT_BYTES.
    'grpc.max_receive_message_length': 256 * 1024,
    // Finds sidecars whose pod vanished without closing the connection.
    'grpc.keepalive_time_ms': 30_000,
    'grpc.keepalive_timeout_ms': 10_000,
  });

  server.addService(configPushService().service, {
    stream: (call: Call) => {
      calls.add(call);
      call.on('close', () => calls.delete(call));
      handleStream(call, opts).catch((error: unknown) => {
        const e = error instanceof StreamError ? error : new StreamError(grpc.status.INTERNAL, 'internal error');
        if (!(error instanceof StreamError)) logger.error({ err: (error as Error)?.message }, 'push stream failed');
        if (!call.cancelled && !call.writableEnded) call.emit('error', { code: e.code, details: e.message });
      });
    },
  });

  const credentials = grpc.ServerCredentials.createSsl(null, [{ private_key: Buffer.from(opts.tls.keyPem), cert_chain: Buffer.from(opts.tls.certPem) }], false);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${opts.host.includes(':') ? `[${opts.host}]` : opts.host}:${opts.port}`, credentials, (error, bound) => (error ? reject(error) : resolve(bound))),
  );
  logger.info({ host: opts.host, port }, 'config push server listening');

  return {
    port,
    async stop() {
      // Tell every sidecar to go elsewhere (a new leader) rather than wait for keepalives to notice.
      for (const call of calls) {
        if (!call.cancelled && !call.writableEnded) call.emit('error', { code: grpc.status.UNAVAILABLE, details: 'operator is shutting down or no longer the leader' });
      }
      await new Promise<void>((resolve) => {
        const force = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, 2_000);
        server.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
      });
      logger.info('config push server stopped');
    },
  };
}

/** The Hello's pod is only a hint, and never used: the token decides. Worth a log line: it points at a misconfiguration. */
function warnOnHelloMismatch(logger: Logger, greeting: Hello, identity: SidecarIdentity): void {
  if ((greeting.podNamespace && greeting.podNamespace !== identity.namespace) || (greeting.podName && greeting.podName !== identity.podName)) {
    logger.warn(
      { claimed: `${greeting.podNamespace}/${greeting.podName}`, actual: `${identity.namespace}/${identity.podName}` },
      'sidecar Hello does not match its token; using the token',
    );
  }
}

async function handleStream(call: Call, opts: PushServerOptions): Promise<void> {
  const { logger, registry } = opts;
  const id = randomUUID();
  let registered = false;
  let source: SpendSource | undefined;
  let helloResolve: ((m: NonNullable<SidecarMessage['hello']>) => void) | undefined;
  const hello = new Promise<NonNullable<SidecarMessage['hello']>>((resolve) => (helloResolve = resolve));

  call.on('data', (message: SidecarMessage) => {
    if (message.hello) {
      helloResolve?.(message.hello);
      helloResolve = undefined;
    } else if (!registered) {
      // Acks before the stream is registered cannot refer to anything we sent.
    } else if (message.ack) {
      registry.ack(id, message.ack.version);
    } else if (message.nack) {
      registry.nack(id, message.nack.version, message.nack.reason.slice(0, 1024));
    } else if (message.auditReport) {
      registry.auditReport(id, boundedAuditReport(message.auditReport));
    } else if (message.aliasHealthReport) {
      // Only the aliases and targets of the sidecar's own config are kept (alias-reports.ts).
      registry.aliasHealthReport(id, message.aliasHealthReport);
    } else if (message.bypassReport && source) {
      // The pod is the token's, whatever the report says (ADR 1605).
      opts.bypass?.report(source, message.bypassReport);
    } else if (message.spendReport && source) {
      const report = message.spendReport;
      if ((report.entries ?? []).length <= MAX_REPORT_ENTRIES) opts.budgets?.spendReport(source, report);
    }
  });
  const closed = new Promise<void>((resolve) => {
    call.on('end', resolve);
    call.on('cancelled', resolve);
    call.on('close', resolve);
    call.on('error', () => resolve());
  });
  void closed.then(() => {
    if (registered) {
      registry.disconnect(id);
      opts.budgets?.disconnected(id);
    }
    if (!call.writableEnded) call.end();
  });

  const token = bearerToken(call.metadata.get(AUTHORIZATION));
  if (!token) throw new StreamError(grpc.status.UNAUTHENTICATED, 'missing authorization: Bearer <projected service-account token>');

  let identity: SidecarIdentity;
  try {
    identity = await reviewToken(opts.api, token);
  } catch (error) {
    if (error instanceof UnauthenticatedError) {
      logger.warn({ peer: call.getPeer(), reason: error.message }, 'push stream refused: token not accepted');
      throw new StreamError(grpc.status.UNAUTHENTICATED, error.message);
    }
    logger.warn({ err: (error as Error).message }, 'token review failed');
    throw new StreamError(grpc.status.UNAVAILABLE, 'cannot review the token now; retry');
  }

  const { annotation, labels } = await podMetadata(opts, identity);

  const helloTimeout = opts.helloTimeoutMs ?? 10_000;
  let timer: NodeJS.Timeout | undefined;
  const greeting = await Promise.race([hello, closed.then(() => undefined), new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), helloTimeout)))]);
  clearTimeout(timer);
  if (greeting === undefined) return;
  if (greeting === 'timeout') throw new StreamError(grpc.status.INVALID_ARGUMENT, 'expected Hello as the first message');
  warnOnHelloMismatch(logger, greeting, identity);
  if (call.cancelled || call.writableEnded) return;

  registered = true;
  const bound = registry.connect({
    id,
    namespace: identity.namespace,
    podName: identity.podName,
    podUid: identity.podUid,
    ...(annotation ? { annotation } : {}),
    // Read from the Hello: what to leave out of each snapshot for it (ADR 0723), and its version for the log.
    configRevision: greeting.configRevision ?? 0,
    sidecarVersion: greeting.sidecarVersion ?? '',
    send: (snapshot: Snapshot) => {
      if (call.cancelled || call.writableEnded || call.destroyed) throw new Error('stream closed');
      call.write({ snapshot: { version: snapshot.version, configJson: snapshot.configJson, credentials: snapshot.credentials, source: snapshot.source } });
    },
    close: (reason: string) => {
      if (!call.cancelled && !call.writableEnded) call.emit('error', { code: grpc.status.RESOURCE_EXHAUSTED, details: reason });
    },
  });
  source = { podUid: identity.podUid, namespace: identity.namespace, pod: identity.podName };
  opts.budgets?.connected({
    id,
    namespace: identity.namespace,
    podName: identity.podName,
    podUid: identity.podUid,
    serviceAccount: identity.serviceAccount,
    labels,
    send: (message: OperatorMessage) => {
      if (call.cancelled || call.writableEnded || call.destroyed) throw new Error('stream closed');
      call.write(message);
    },
  });
  logger.debug({ pod: `${identity.namespace}/${identity.podName}`, runs: greeting.currentVersion, source: bound }, 'push stream registered');
}

/** The report ends up in the ProxyConfig's status: bounded, whatever a sidecar sends. */
function boundedAuditReport(report: AuditReport): AuditReport {
  return {
    streamConnected: report.streamConnected === true,
    streamDisconnects: String(report.streamDisconnects ?? 0),
    sinks: (report.sinks ?? [])
      .slice(0, 16)
      .map((s) => ({ ...s, name: String(s.name).slice(0, 63), kind: String(s.kind).slice(0, 16), lastError: String(s.lastError ?? '').slice(0, 512) })),
  };
}

function bearerToken(values: grpc.MetadataValue[]): string | undefined {
  const header = values[0];
  if (typeof header !== 'string') return undefined;
  const match = /^Bearer\s+(\S+)$/i.exec(header.trim());
  return match?.[1];
}

/** The pod's tollgate.dev/proxy-config annotation and its labels (BudgetPolicy selectors match them): cached, else read. */
async function podMetadata(opts: PushServerOptions, identity: SidecarIdentity): Promise<{ annotation?: string; labels: Record<string, string> }> {
  const cached = opts.pods?.(`${identity.namespace}/${identity.podName}`);
  // Another UID: the cache may not have seen the pod replaced yet; the API server says.
  const pod = cached?.metadata.uid === identity.podUid ? cached : await readPod(opts.api, identity);
  const annotation = pod.metadata.annotations?.[PROXY_CONFIG_ANNOTATION];
  return { ...(annotation !== undefined ? { annotation } : {}), labels: pod.metadata.labels ?? {} };
}

async function readPod(api: KubeApi, identity: SidecarIdentity): Promise<{ metadata: { annotations?: Record<string, string>; labels?: Record<string, string> } }> {
  try {
    const pod = await api.get<{ metadata: { uid?: string; annotations?: Record<string, string>; labels?: Record<string, string> } }>(
      `/api/v1/namespaces/${identity.namespace}/pods/${identity.podName}`,
    );
    if (pod.metadata.uid !== identity.podUid) {
      throw new StreamError(grpc.status.UNAUTHENTICATED, `pod ${identity.namespace}/${identity.podName} was replaced; the token belongs to an earlier pod`);
    }
    return pod;
  } catch (error) {
    if (error instanceof StreamError) throw error;
    if (isStatus(error, 404)) throw new StreamError(grpc.status.UNAUTHENTICATED, `pod ${identity.namespace}/${identity.podName} does not exist`);
    throw new StreamError(grpc.status.UNAVAILABLE, 'cannot read the pod now; retry');
  }
}
