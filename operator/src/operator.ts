// Assembles the operator: the informers (operator-caches.ts) run on every replica, each controller registers its
// watches on them, and what only the leader runs (the controllers' workers, the push server, the leader
// endpoint) starts and stops with the Lease (leadership.ts, ADR 0701).

import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { BudgetPolicyController } from './budgets/budget-policy-controller.ts';
import { ProxyConfigController } from './controller/proxy-config-controller.ts';
import { KubeApi } from '../../kube-client/api-client.ts';
import { EventRecorder } from '../../kube-client/event-recorder.ts';
import type { OwnerReference } from '../../kube-client/owner-reference.ts';
import { LeaderElector } from './kube/leader-election.ts';
import { LeaderEndpoint } from './kube/leader-endpoint.ts';
import type { ProbedInformer } from './health/health-server.ts';
import { Leadership } from './leadership.ts';
import { OperatorCaches } from './operator-caches.ts';
import { CaPublication } from './tls/ca-publication.ts';
import { storedCa, type TlsSource } from './tls/serving-certificate.ts';
import type { OperatorMetrics } from './metrics/operator-metrics.ts';
import type { BudgetRedisConfig } from '../../contracts/budget-config.ts';
import { openRedisClient } from '../../contracts/redis-connection.ts';

export interface OperatorOptions {
  kubeConfig: KubeConfig;
  logger: Logger;
  identity: string;
  leaseNamespace: string;
  leaseName: string;
  grpcHost: string;
  grpcPort: number;
  tls: TlsSource;
  /** The ConfigMap (in leaseNamespace) the CA sidecars trust is published in, for the webhook (ADR 0809). */
  caConfigMap?: string;
  /**
   * Named in the ownerReferences of everything the operator creates (Lease, EndpointSlice, TLS Secret, ledger
   * ConfigMaps), so the garbage collector deletes them with it (ADR 0807). Absent: no owner (outside a cluster).
   */
  owner?: OwnerReference;
  /** Watch only this namespace (ProxyConfigs and Secrets); all namespaces when absent. */
  watchNamespace?: string;
  workers?: number;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  /**
   * The selector-less push Service whose EndpointSlice the leader keeps pointing at `podIP` (in
   * leaseNamespace). Absent: no EndpointSlice is written (running outside a cluster).
   */
  leaderEndpoint?: { service: string; podIP: string; portName?: string; resyncMs?: number };
  /** How long a model alias may be served below its first priority before AliasDegraded (default 3 minutes, ADR 0724). */
  aliasDegradedAfterMs?: number;
  /** Counts reconciles, queue waits and snapshots, and reads leadership, queue depth and streams at scrape time. */
  metrics?: OperatorMetrics;
  /** budgets.store redis: the leader keeps the cluster ledger there instead of in ConfigMaps (ADR 1314). */
  ledgerRedis?: BudgetRedisConfig;
}

export interface Operator {
  isLeader(): boolean;
  /** The informers by name, for the health probes (they run on every replica, leader or not). */
  informers: Record<string, ProbedInformer>;
  /** The push server's port while leading. */
  pushPort(): number | undefined;
  stop(): Promise<void>;
}

export function startOperator(opts: OperatorOptions): Operator {
  const { logger } = opts;
  const api = new KubeApi(opts.kubeConfig);
  const recorder = new EventRecorder(api, { reportingController: 'tollgate.dev/operator', reportingInstance: opts.identity, logger });
  const caches = new OperatorCaches(api, logger, opts.watchNamespace);
  const caPublication = new CaPublication({
    api,
    namespace: opts.leaseNamespace,
    name: opts.caConfigMap ?? 'tollgate-operator-ca',
    logger: opts.logger,
    owner: opts.owner,
  });
  // One connection for the process: a new leadership term reuses it, and it reconnects on its own.
  const ledgerRedis = opts.ledgerRedis ? { client: openRedisClient(opts.ledgerRedis), keyPrefix: opts.ledgerRedis.keyPrefix, url: opts.ledgerRedis.url } : undefined;
  const leadership = new Leadership({ opts, api, recorder, caches, caPublication, leaderEndpoint: leaderEndpoint(api, opts), ...(ledgerRedis ? { ledgerRedis } : {}) });
  void publishStoredCa(opts, api, caPublication);
  ProxyConfigController.watch(caches, () => leadership.work?.proxyConfigs);
  BudgetPolicyController.watch(caches.budgetPolicies, () => leadership.work?.budgets);
  caches.start();

  const elector = new LeaderElector({
    // A pool of its own: renewing the Lease never waits behind a burst of TokenReviews from connecting sidecars.
    api: new KubeApi(opts.kubeConfig),
    namespace: opts.leaseNamespace,
    name: opts.leaseName,
    identity: opts.identity,
    logger,
    ...(opts.owner ? { owner: opts.owner } : {}),
    ...(opts.leaseDurationMs ? { leaseDurationMs: opts.leaseDurationMs } : {}),
    ...(opts.renewDeadlineMs ? { renewDeadlineMs: opts.renewDeadlineMs } : {}),
    ...(opts.retryPeriodMs ? { retryPeriodMs: opts.retryPeriodMs } : {}),
    onStartedLeading: () => leadership.started(),
    onStoppedLeading: () => leadership.stopped(),
    onNewLeader: (holder) => logger.info({ leader: holder }, 'observed leader'),
  });
  elector.start();
  opts.metrics?.watch({
    leader: () => elector.isLeader(),
    queueDepth: () => leadership.work?.proxyConfigs.queue.length ?? 0,
    connectedSidecars: () => leadership.work?.proxyConfigs.registry.size ?? 0,
  });

  return {
    isLeader: () => elector.isLeader(),
    informers: caches.probed,
    pushPort: () => leadership.work?.server?.port,
    async stop() {
      await elector.stop();
      await leadership.settled();
      await caches.stop();
      ledgerRedis?.client.disconnect();
    },
  };
}

/**
 * Every replica, leader or not, publishes the CA the leader keeps if the ConfigMap is missing: after an upgrade
 * from a release that did not publish it, the webhook need not wait for a new replica to take the Lease.
 */
async function publishStoredCa(opts: OperatorOptions, api: KubeApi, publication: CaPublication): Promise<void> {
  try {
    const ca = await storedCa(opts.tls, api);
    if (ca) await publication.publish(ca, { onlyIfMissing: true });
  } catch (error) {
    // The leader publishes it anyway; this replica only tried to be early.
    opts.logger.info({ err: error instanceof Error ? error.message : String(error) }, 'could not publish the stored operator CA; the leader will');
  }
}

/** The push Service's EndpointSlice, which the leader points at itself; none outside a cluster. */
function leaderEndpoint(api: KubeApi, opts: OperatorOptions): LeaderEndpoint | undefined {
  const endpoint = opts.leaderEndpoint;
  if (!endpoint) return undefined;
  return new LeaderEndpoint({
    api,
    namespace: opts.leaseNamespace,
    service: endpoint.service,
    identity: opts.identity,
    podIP: endpoint.podIP,
    ...(opts.owner ? { owner: opts.owner } : {}),
    logger: opts.logger.child({ component: 'leader-endpoint' }),
    ...(endpoint.portName ? { portName: endpoint.portName } : {}),
    ...(endpoint.resyncMs ? { resyncMs: endpoint.resyncMs } : {}),
  });
}
