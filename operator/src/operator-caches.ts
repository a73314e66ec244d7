// The operator's informers: ProxyConfigs, the Secrets labelled as credentials (ADR 0722), BudgetPolicies, and
// the pods' metadata (labels and the proxy-config annotation a connecting sidecar's pod is bound by, ADR 1307).
// They run on every replica, so a standby's cache is warm when it takes over (ADR 0701): a thousand sidecars
// reconnecting to a new leader then cost a TokenReview each, not a pod read as well. The controllers that run
// only on the leader register their watches on them.

import type { Logger } from 'pino';
import { BUDGET_POLICY, PROXY_CONFIG } from '../../crds/index.ts';
import type { KubeApi } from '../../kube-client/api-client.ts';
import { Informer } from '../../kube-client/informer.ts';
import type { CachedBudgetPolicy } from './budgets/budget-policy-controller.ts';
import type { CachedProxyConfig } from './controller/proxy-config-controller.ts';
import { CREDENTIALS_LABEL_SELECTOR, type SecretObject, slimSecret } from './controller/secret-object.ts';
import type { ProbedInformer } from './health/health-server.ts';
import { type PodMetadata, slimPodMetadata } from './push/pod-metadata.ts';

export class OperatorCaches {
  readonly proxyConfigs: Informer<CachedProxyConfig>;
  readonly secrets: Informer<SecretObject>;
  readonly budgetPolicies: Informer<CachedBudgetPolicy>;
  readonly pods: Informer<PodMetadata>;

  /** Informers over `watchNamespace`, or all namespaces; not started yet, so watches can be registered first. */
  constructor(api: KubeApi, logger: Logger, watchNamespace: string | undefined) {
    const nsPath = watchNamespace ? `/namespaces/${watchNamespace}` : '';
    this.proxyConfigs = new Informer<CachedProxyConfig>({
      api,
      path: `/apis/${PROXY_CONFIG.group}/${PROXY_CONFIG.version}${nsPath}/${PROXY_CONFIG.plural}`,
      logger: logger.child({ informer: 'proxyconfigs' }),
    });
    this.secrets = new Informer<SecretObject>({
      api,
      path: `/api/v1${nsPath}/secrets`,
      logger: logger.child({ informer: 'secrets' }),
      transform: slimSecret,
      // Only opted-in Secrets are cached; removing the label arrives as a delete and the ProxyConfig is re-reconciled.
      labelSelector: CREDENTIALS_LABEL_SELECTOR,
    });
    this.budgetPolicies = new Informer<CachedBudgetPolicy>({
      api,
      path: `/apis/${BUDGET_POLICY.group}/${BUDGET_POLICY.version}${nsPath}/${BUDGET_POLICY.plural}`,
      logger: logger.child({ informer: 'budgetpolicies' }),
    });
    this.pods = new Informer<PodMetadata>({
      api,
      path: `/api/v1${nsPath}/pods`,
      logger: logger.child({ informer: 'pods' }),
      metadataOnly: true,
      transform: slimPodMetadata,
    });
  }

  /** The informers by name, for the health probes. */
  get probed(): Record<string, ProbedInformer> {
    return { proxyconfigs: this.proxyConfigs, secrets: this.secrets, budgetpolicies: this.budgetPolicies, pods: this.pods };
  }

  start(): void {
    this.proxyConfigs.start();
    this.secrets.start();
    this.budgetPolicies.start();
    this.pods.start();
  }

  /** Resolves true once every cache has synced, false when `signal` aborts first. */
  async synced(signal: AbortSignal): Promise<boolean> {
    const aborted = new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
    // Not the pods: a connecting sidecar's pod not in the cache yet is read from the API server instead.
    await Promise.race([Promise.all([this.proxyConfigs.waitForSync(), this.secrets.waitForSync(), this.budgetPolicies.waitForSync()]), aborted]);
    return !signal.aborted;
  }

  async stop(): Promise<void> {
    await Promise.all([this.proxyConfigs.stop(), this.secrets.stop(), this.budgetPolicies.stop(), this.pods.stop()]);
  }
}
