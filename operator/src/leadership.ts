// What runs only on the leader (ADR 0701): the two controllers, the push server and the leader endpoint. It
// starts when the Lease is won, retrying with backoff until it is up, and stops when the Lease is lost or on
// shutdown; transitions are serialised, so a stop waits for a start still in progress. The leader lists itself
// as the push Service's only endpoint once its push server listens, and withdraws before it stops (ADR 0721).

import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { Backoff } from '../../kube-client/backoff.ts';
import type { KubeApi } from '../../kube-client/api-client.ts';
import type { EventRecorder } from '../../kube-client/event-recorder.ts';
import type { Redis } from 'ioredis';
import { BudgetPolicyController } from './budgets/budget-policy-controller.ts';
import { type LedgerBackend, LedgerStore } from './budgets/ledger-store.ts';
import { RedisLedgerStore } from './budgets/redis-ledger-store.ts';
import { ProxyConfigController } from './controller/proxy-config-controller.ts';
import type { LeaderEndpoint } from './kube/leader-endpoint.ts';
import type { OperatorCaches } from './operator-caches.ts';
import type { OperatorOptions } from './operator.ts';
import { BypassEvents } from './push/bypass-events.ts';
import { type PushServer, startPushServer } from './push/push-server.ts';
import type { CaPublication } from './tls/ca-publication.ts';
import { loadServingCertificate } from './tls/serving-certificate.ts';

export interface LeaderWork {
  proxyConfigs: ProxyConfigController;
  budgets: BudgetPolicyController;
  server?: PushServer;
  endpoint?: { abort: AbortController; publishing: Promise<void> };
}

interface LeadershipContext {
  opts: OperatorOptions;
  api: KubeApi;
  recorder: EventRecorder;
  caches: OperatorCaches;
  caPublication: CaPublication;
  leaderEndpoint: LeaderEndpoint | undefined;
  /** budgets.store redis: the open connection the leader keeps the cluster ledger through (ADR 1314). */
  ledgerRedis?: { client: Redis; keyPrefix: string; url: string };
}

export class Leadership {
  readonly #context: LeadershipContext;
  readonly #logger: Logger;
  #work: LeaderWork | undefined;
  #transition: Promise<void> = Promise.resolve();
  #leadingAbort: AbortController | undefined;

  constructor(context: LeadershipContext) {
    this.#context = context;
    this.#logger = context.opts.logger;
  }

  /** The leader's work while this replica leads and it has started. */
  get work(): LeaderWork | undefined {
    return this.#work;
  }

  /** The Lease was won. Not awaited by the elector: it must keep renewing while the caches sync and the server starts. */
  started(): void {
    const abort = new AbortController();
    this.#leadingAbort = abort;
    this.#transition = this.#transition.then(async () => {
      const backoff = new Backoff({ baseMs: 1_000, maxMs: 30_000, jitter: 0.3 });
      while (!abort.signal.aborted) {
        try {
          await this.#lead(abort.signal);
          return;
        } catch (error) {
          await this.#stop();
          const delay = backoff.next();
          this.#logger.error({ err: error instanceof Error ? error.message : String(error), retryInMs: delay }, 'could not start leader work; retrying');
          await sleep(delay, undefined, { signal: abort.signal }).catch(() => undefined);
        }
      }
    });
  }

  /** The Lease was lost (or the operator stops): resolves once the leader's work has stopped. */
  async stopped(): Promise<void> {
    this.#leadingAbort?.abort();
    this.#transition = this.#transition.then(() => this.#stop());
    await this.#transition;
  }

  /** Resolves when no transition is in progress. */
  async settled(): Promise<void> {
    await this.#transition;
  }

  async #lead(signal: AbortSignal): Promise<void> {
    const { opts, api, recorder, caches } = this.#context;
    if (!(await caches.synced(signal))) return;
    const context = { api, logger: opts.logger, recorder };
    const budgets = new BudgetPolicyController({ ...context, budgetPolicies: caches.budgetPolicies }, this.#ledgerStore());
    await budgets.load();
    if (signal.aborted) return;
    const proxyConfigs = new ProxyConfigController({
      ...context,
      proxyConfigs: caches.proxyConfigs,
      secrets: caches.secrets,
      metrics: opts.metrics,
      aliasDegradedAfterMs: opts.aliasDegradedAfterMs,
    });
    proxyConfigs.start(opts.workers ?? 2);
    budgets.start();
    const work: LeaderWork = { proxyConfigs, budgets };
    this.#work = work;
    const tls = await loadServingCertificate(opts.tls, api, opts.logger, opts.owner);
    if (signal.aborted) return;
    // Before the push server: the webhook injects sidecars only once it has the CA they will need to trust.
    if (tls.caPem) await this.#context.caPublication.publish(tls.caPem);
    if (signal.aborted) return;
    work.server = await startPushServer({
      api,
      registry: proxyConfigs.registry,
      logger: opts.logger.child({ component: 'push' }),
      host: opts.grpcHost,
      port: opts.grpcPort,
      tls,
      budgets: budgets.streams(),
      pods: (key) => caches.pods.get(key),
      bypass: new BypassEvents({ recorder, logger: opts.logger.child({ component: 'bypass' }), metrics: opts.metrics }),
    });
    const { leaderEndpoint } = this.#context;
    if (leaderEndpoint) {
      // Only now: the Service must not send sidecars here before the push port listens.
      const abort = new AbortController();
      work.endpoint = { abort, publishing: leaderEndpoint.publish(work.server.port, abort.signal) };
    }
  }

  #ledgerStore(): LedgerBackend {
    const { opts, api, ledgerRedis } = this.#context;
    const configMaps = new LedgerStore(api, opts.leaseNamespace, opts.owner);
    if (!ledgerRedis) return configMaps;
    return new RedisLedgerStore(ledgerRedis.client, { keyPrefix: ledgerRedis.keyPrefix, url: ledgerRedis.url, before: () => configMaps.load() });
  }

  async #stop(): Promise<void> {
    const current = this.#work;
    this.#work = undefined;
    if (!current) return;
    const { leaderEndpoint } = this.#context;
    if (current.endpoint && leaderEndpoint) {
      // Withdraw first, so new connections stop arriving before the push server closes.
      current.endpoint.abort.abort();
      await current.endpoint.publishing;
      await leaderEndpoint.withdraw();
    }
    await current.server?.stop();
    await current.proxyConfigs.stop();
    await current.budgets.stop();
  }
}
