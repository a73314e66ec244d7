// Assembles the operator: informers for ProxyConfigs and for the Secrets labelled as credentials
// (docs/decisions/0722) run on every replica (a standby's cache is warm when it takes over); the reconcilers, the sidecar registry and the push server run only on the leader
// (docs/decisions/0701), started when the Lease is won and stopped when it is lost or on shutdown. The leader
// lists itself as the push Service's only endpoint once its push server listens, and withdraws before it
// stops (docs/decisions/0721).

import { setTimeout as sleep } from 'node:timers/promises';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { BUDGET_POLICY, PROXY_CONFIG } from '../../crds/index.ts';
import type { CompiledPolicy } from '../../contracts/budget-policies.ts';
import { formatUsd, unitsToUsd } from '../../contracts/money.ts';
import { BudgetDistributor } from './budgets/budget-distributor.ts';
import { budgetPolicyRef, type CachedBudgetPolicy, reconcileBudgetPolicy } from './budgets/budget-policy-controller.ts';
import { ClusterLedger } from './budgets/cluster-ledger.ts';
import { LedgerStore } from './budgets/ledger-store.ts';
import { type CachedProxyConfig, proxyConfigRef, reconcileProxyConfig } from './controller/proxy-config-controller.ts';
import { CREDENTIALS_LABEL_SELECTOR, type SecretObject, slimSecret } from './controller/secret-object.ts';
import { Backoff } from '../../kube-client/backoff.ts';
import { KubeApi, objectKey } from '../../kube-client/api-client.ts';
import { EventRecorder } from '../../kube-client/event-recorder.ts';
import { Informer } from '../../kube-client/informer.ts';
import type { OwnerReference } from '../../kube-client/owner-reference.ts';
import { LeaderElector } from './kube/leader-election.ts';
import { LeaderEndpoint } from './kube/leader-endpoint.ts';
import { runWorkers, WorkQueue, type Workers } from './kube/work-queue.ts';
import { type PushServer, startPushServer } from './push/push-server.ts';
import type { ProbedInformer } from './health/health-server.ts';
import { SidecarRegistry } from './push/sidecar-registry.ts';
import { referencedSecrets } from './render.ts';
import { loadServingCertificate, type TlsSource } from './tls/serving-certificate.ts';
import type { OperatorMetrics } from './metrics/operator-metrics.ts';

export interface OperatorOptions {
  kubeConfig: KubeConfig;
  logger: Logger;
  identity: string;
  leaseNamespace: string;
  leaseName: string;
  grpcHost: string;
  grpcPort: number;
  tls: TlsSource;
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
  /** Counts reconciles, queue waits and snapshots, and reads leadership, queue depth and streams at scrape time. */
  metrics?: OperatorMetrics;
}

export interface Operator {
  isLeader(): boolean;
  /** The informers by name, for the health probes (they run on every replica, leader or not). */
  informers: Record<string, ProbedInformer>;
  /** The push server's port while leading. */
  pushPort(): number | undefined;
  stop(): Promise<void>;
}

interface LeaderWork {
  queue: WorkQueue;
  workers: Workers;
  budgetQueue: WorkQueue;
  budgetWorkers: Workers;
  ledger: ClusterLedger;
  registry: SidecarRegistry;
  server?: PushServer;
  endpoint?: { abort: AbortController; publishing: Promise<void> };
}

export function startOperator(opts: OperatorOptions): Operator {
  const { logger } = opts;
  const api = new KubeApi(opts.kubeConfig);
  const recorder = new EventRecorder(api, { reportingController: 'tollgate.dev/operator', reportingInstance: opts.identity, logger });
  const nsPath = opts.watchNamespace ? `/namespaces/${opts.watchNamespace}` : '';
  const proxyConfigs = new Informer<CachedProxyConfig>({
    api,
    path: `/apis/${PROXY_CONFIG.group}/${PROXY_CONFIG.version}${nsPath}/${PROXY_CONFIG.plural}`,
    logger: logger.child({ informer: 'proxyconfigs' }),
  });
  const secrets = new Informer<SecretObject>({
    api,
    path: `/api/v1${nsPath}/secrets`,
    logger: logger.child({ informer: 'secrets' }),
    transform: slimSecret,
    // Only opted-in Secrets are cached; removing the label arrives as a delete and the ProxyConfig is re-reconciled.
    labelSelector: CREDENTIALS_LABEL_SELECTOR,
  });

  const leaderEndpoint = opts.leaderEndpoint
    ? new LeaderEndpoint({
        api,
        namespace: opts.leaseNamespace,
        service: opts.leaderEndpoint.service,
        identity: opts.identity,
        podIP: opts.leaderEndpoint.podIP,
        ...(opts.owner ? { owner: opts.owner } : {}),
        logger: logger.child({ component: 'leader-endpoint' }),
        ...(opts.leaderEndpoint.portName ? { portName: opts.leaderEndpoint.portName } : {}),
        ...(opts.leaderEndpoint.resyncMs ? { resyncMs: opts.leaderEndpoint.resyncMs } : {}),
      })
    : undefined;

  let work: LeaderWork | undefined;
  const enqueue = (key: string) => work?.queue.add(key);

  proxyConfigs.on({
    add: (pc) => {
      enqueue(objectKey(pc));
      work?.registry.rebind(pc.metadata.namespace);
    },
    update: (pc) => enqueue(objectKey(pc)),
    delete: (pc) => {
      enqueue(objectKey(pc));
      work?.registry.rebind(pc.metadata.namespace);
    },
  });
  const secretChanged = (secret: SecretObject) => {
    const ns = secret.metadata.namespace ?? '';
    for (const pc of proxyConfigs.list(ns)) {
      if (referencedSecrets(pc.spec).includes(secret.metadata.name)) enqueue(objectKey(pc));
    }
  };
  secrets.on({ add: secretChanged, update: secretChanged, delete: secretChanged });
  const budgetPolicies = new Informer<CachedBudgetPolicy>({
    api,
    path: `/apis/${BUDGET_POLICY.group}/${BUDGET_POLICY.version}${nsPath}/${BUDGET_POLICY.plural}`,
    logger: logger.child({ informer: 'budgetpolicies' }),
  });
  const enqueueBudget = (bp: CachedBudgetPolicy) => work?.budgetQueue.add(objectKey(bp));
  budgetPolicies.on({ add: enqueueBudget, update: enqueueBudget, delete: enqueueBudget });
  proxyConfigs.start();
  secrets.start();
  budgetPolicies.start();

  // Leadership transitions are serialised: a stop waits for a start still in progress.
  let transition: Promise<void> = Promise.resolve();
  let leadingAbort: AbortController | undefined;

  const startLeading = async (signal: AbortSignal) => {
    const aborted = new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
    await Promise.race([Promise.all([proxyConfigs.waitForSync(), secrets.waitForSync(), budgetPolicies.waitForSync()]), aborted]);
    if (signal.aborted) return;
    const queue = new WorkQueue(undefined, opts.metrics);
    const budgetQueue = new WorkQueue();
    // Budgets (ADR 1302): the ledger lives in ConfigMaps of the operator's namespace; this leader is its only writer.
    const compiled = new Map<string, CompiledPolicy>();
    let distributor: BudgetDistributor | undefined;
    const ledger = new ClusterLedger({
      store: new LedgerStore(api, opts.leaseNamespace, opts.owner),
      logger: logger.child({ component: 'budgets' }),
      policy: (key) => compiled.get(key),
      acknowledge: (source, sequence) => distributor?.acknowledge(source.podUid, sequence),
      applied: (changes, acknowledged) => {
        distributor?.applied(changes, acknowledged);
        for (const key of changes.keys()) budgetQueue.addAfter(key, 1_000);
      },
      alert: (alert) => {
        const note = `User ${alert.userId} reached ${alert.threshold}% of the budget: ${formatUsd(alert.limitUsed)} of ${formatUsd(alert.limit)} USD in the period from ${new Date(alert.periodStart).toISOString()}`;
        logger.warn(
          {
            budgetPolicy: alert.policy,
            user_id: alert.userId,
            policy: alert.policy,
            threshold: alert.threshold,
            spent_usd: unitsToUsd(alert.spent),
            limit_usd: unitsToUsd(alert.limit),
            period_start: new Date(alert.periodStart).toISOString(),
          },
          `budget alert: ${note}`,
        );
        const bp = budgetPolicies.get(alert.policy);
        if (bp) void recorder.record({ regarding: budgetPolicyRef(bp), type: 'Warning', reason: 'BudgetThresholdReached', action: 'Charge', note });
      },
    });
    await ledger.load();
    if (signal.aborted) return;
    distributor = new BudgetDistributor({ ledger, logger: logger.child({ component: 'budgets' }) });
    const budgetDeps = { api, logger, recorder, budgetPolicies, ledger, distributor, compiled };
    const registry = new SidecarRegistry({
      counter: opts.metrics,
      exists: (key) => proxyConfigs.get(key) !== undefined,
      logger: logger.child({ component: 'push' }),
      listener: {
        countsChanged: (source) => queue.add(source),
        pushed: (source, version, count) => {
          const pc = proxyConfigs.get(source);
          if (!pc) return;
          logger.info({ proxyConfig: source, version, sidecars: count }, 'config pushed');
          void recorder.record({
            regarding: proxyConfigRef(pc),
            type: 'Normal',
            reason: 'Pushed',
            action: 'Push',
            note: `Pushed config version ${version} to ${count} sidecar${count === 1 ? '' : 's'}`,
          });
        },
        rejected: (source, pod, version, reason) => {
          const pc = proxyConfigs.get(source);
          if (!pc) return;
          void recorder.record({
            regarding: proxyConfigRef(pc),
            related: { apiVersion: 'v1', kind: 'Pod', name: pod.name, namespace: pod.namespace, ...(pod.uid ? { uid: pod.uid } : {}) },
            type: 'Warning',
            reason: 'SidecarRejected',
            action: 'Apply',
            note: `Sidecar of pod ${pod.namespace}/${pod.name} rejected config version ${version}: ${reason}`,
          });
        },
      },
    });
    const deps = { api, logger, recorder, proxyConfigs, secrets, registry };
    const workers = runWorkers(
      queue,
      opts.workers ?? 2,
      (key) => reconcileProxyConfig(key, deps),
      (key, error, retryInMs) => logger.warn({ proxyConfig: key, err: error instanceof Error ? error.message : String(error), retryInMs }, 'reconcile failed; retrying'),
    );
    const budgetWorkers = runWorkers(
      budgetQueue,
      1,
      (key) => reconcileBudgetPolicy(key, budgetDeps),
      (key, error, retryInMs) => logger.warn({ budgetPolicy: key, err: error instanceof Error ? error.message : String(error), retryInMs }, 'reconcile failed; retrying'),
    );
    work = { queue, workers, budgetQueue, budgetWorkers, ledger, registry };
    for (const pc of proxyConfigs.list()) queue.add(objectKey(pc));
    // Every policy, and every ledger whose policy is gone (its reconcile deletes it).
    for (const key of new Set([...budgetPolicies.list().map((bp) => objectKey(bp)), ...ledger.policies()])) budgetQueue.add(key);
    const tls = await loadServingCertificate(opts.tls, api, logger, opts.owner);
    if (signal.aborted) return;
    const budgetStreams = {
      connected: (sidecar: Parameters<BudgetDistributor['connect']>[0]) => {
        distributor.connect(sidecar);
        for (const key of distributor.policiesIn(sidecar.namespace)) budgetQueue.addAfter(key, 1_000);
      },
      disconnected: (id: string) => {
        const namespace = distributor.disconnect(id);
        if (namespace !== undefined) for (const key of distributor.policiesIn(namespace)) budgetQueue.addAfter(key, 1_000);
      },
      spendReport: (source: Parameters<ClusterLedger['submit']>[0], report: { sequence: string | number; entries: Parameters<ClusterLedger['submit']>[2] }) =>
        ledger.submit(source, Number(report.sequence), report.entries ?? []),
    };
    work.server = await startPushServer({ api, registry, logger: logger.child({ component: 'push' }), host: opts.grpcHost, port: opts.grpcPort, tls, budgets: budgetStreams });
    if (leaderEndpoint) {
      // Only now: the Service must not send sidecars here before the push port listens.
      const abort = new AbortController();
      work.endpoint = { abort, publishing: leaderEndpoint.publish(work.server.port, abort.signal) };
    }
  };

  const stopLeading = async () => {
    const current = work;
    work = undefined;
    if (!current) return;
    if (current.endpoint && leaderEndpoint) {
      // Withdraw first, so new connections stop arriving before the push server closes.
      current.endpoint.abort.abort();
      await current.endpoint.publishing;
      await leaderEndpoint.withdraw();
    }
    await current.server?.stop();
    await current.workers.stop();
    await current.budgetWorkers.stop();
    // What was queued and not written stays unacknowledged on the sidecars' disks; the next leader gets it.
    await current.ledger.stop();
    current.registry.close();
  };

  const elector = new LeaderElector({
    api,
    namespace: opts.leaseNamespace,
    name: opts.leaseName,
    identity: opts.identity,
    logger,
    ...(opts.owner ? { owner: opts.owner } : {}),
    ...(opts.leaseDurationMs ? { leaseDurationMs: opts.leaseDurationMs } : {}),
    ...(opts.renewDeadlineMs ? { renewDeadlineMs: opts.renewDeadlineMs } : {}),
    ...(opts.retryPeriodMs ? { retryPeriodMs: opts.retryPeriodMs } : {}),
    onStartedLeading: () => {
      const abort = new AbortController();
      leadingAbort = abort;
      // Not awaited: the elector must keep renewing while the caches sync and the server starts.
      transition = transition.then(async () => {
        const backoff = new Backoff({ baseMs: 1_000, maxMs: 30_000, jitter: 0.3 });
        while (!abort.signal.aborted) {
          try {
            await startLeading(abort.signal);
            return;
          } catch (error) {
            await stopLeading();
            const delay = backoff.next();
            logger.error({ err: error instanceof Error ? error.message : String(error), retryInMs: delay }, 'could not start leader work; retrying');
            await sleep(delay, undefined, { signal: abort.signal }).catch(() => undefined);
          }
        }
      });
    },
    onStoppedLeading: async () => {
      leadingAbort?.abort();
      transition = transition.then(stopLeading);
      await transition;
    },
    onNewLeader: (holder) => logger.info({ leader: holder }, 'observed leader'),
  });
  elector.start();
  opts.metrics?.watch({
    leader: () => elector.isLeader(),
    queueDepth: () => work?.queue.length ?? 0,
    connectedSidecars: () => work?.registry.size ?? 0,
  });

  return {
    isLeader: () => elector.isLeader(),
    informers: { proxyconfigs: proxyConfigs, secrets, budgetpolicies: budgetPolicies },
    pushPort: () => work?.server?.port,
    async stop() {
      await elector.stop();
      await transition;
      await Promise.all([proxyConfigs.stop(), secrets.stop(), budgetPolicies.stop()]);
    },
  };
}
