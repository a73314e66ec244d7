// One AdmissionReview for a pod → a response, plus the log line and Event the decision deserves.

import type { V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { eventTarget } from '../events/event-target.ts';
import type { PodEventQueue } from '../events/pod-event-queue.ts';
import { planInjection, type InjectionDecision } from '../inject.ts';
import type { SidecarDefaults } from '../sidecar-settings.ts';
import { allow, responseFor, type AdmissionRequest, type AdmissionResponse } from './admission-review.ts';
import type { NamespaceLabelLookup } from './namespace-labels.ts';
import type { AuditLookup } from './proxy-config-audit.ts';
import { ANNOTATIONS } from '../annotations.ts';
import type { WebhookMetrics } from '../metrics/webhook-metrics.ts';

export interface PodAdmissionDeps {
  logger: Logger;
  ownNamespace: string;
  /** Read per request, so a reload (new sidecar defaults, new operator CA) applies to the next pod. */
  defaults(): SidecarDefaults;
  operatorCaPem(): string;
  nativeSidecarSupported(): boolean;
  namespaceLabels: NamespaceLabelLookup;
  events?: PodEventQueue;
  /** Whether the pod's ProxyConfig enables audit; absent: never. */
  auditEnabled?: AuditLookup;
  /** The chart's audit.hostSocket: the Tetragon socket directory to mount, or undefined when not allowed. */
  auditHostSocketDir?: string;
  /** Counts each admission by outcome (and skip reason). */
  metrics?: Pick<WebhookMetrics, 'admitted'>;
}

/** Thrown for failures that are ours, not the pod's: the server answers 500 and failurePolicy decides. */
export class AdmissionUnavailableError extends Error {
  override name = 'AdmissionUnavailableError';
}

export async function admitPod(request: AdmissionRequest, deps: PodAdmissionDeps): Promise<AdmissionResponse> {
  const isPodCreate =
    request.operation === 'CREATE' &&
    request.resource.group === '' &&
    request.resource.resource === 'pods' &&
    !request.subResource &&
    typeof request.object === 'object' &&
    request.object !== null;
  if (!isPodCreate) return allow(request.uid);

  const pod = request.object as V1Pod;
  const namespace = request.namespace ?? pod.metadata?.namespace ?? 'default';
  let namespaceLabels: Record<string, string>;
  try {
    namespaceLabels = await deps.namespaceLabels(namespace);
  } catch (error) {
    deps.metrics?.admitted('error');
    throw new AdmissionUnavailableError(`cannot read namespace ${namespace}: ${(error as Error).message}`, { cause: error });
  }
  let audit: { hostSocketDir?: string } | undefined;
  if (deps.auditEnabled) {
    const proxyConfig = pod.metadata?.annotations?.[ANNOTATIONS.proxyConfig] ?? 'default';
    try {
      if (await deps.auditEnabled(namespace, proxyConfig)) audit = deps.auditHostSocketDir ? { hostSocketDir: deps.auditHostSocketDir } : {};
    } catch (error) {
      deps.logger.warn({ namespace, proxyConfig, err: (error as Error).message }, 'cannot read the ProxyConfig for audit or provenance; injecting without Tetragon access');
    }
  }
  const decision = planInjection({
    ...(audit ? { audit } : {}),
    pod,
    namespace,
    namespaceLabels,
    ownNamespace: deps.ownNamespace,
    defaults: deps.defaults(),
    nativeSidecarSupported: deps.nativeSidecarSupported(),
    operatorCaPem: deps.operatorCaPem(),
  });
  report(decision, pod, namespace, request, deps);
  return responseFor(request.uid, decision);
}

function report(decision: InjectionDecision, pod: V1Pod, namespace: string, request: AdmissionRequest, deps: PodAdmissionDeps): void {
  const podName = pod.metadata?.name || `${pod.metadata?.generateName ?? ''}*`;
  const log = deps.logger.child({ uid: request.uid, namespace, pod: podName, dryRun: request.dryRun === true });
  // A dry run must have no side effects (sideEffects: None): log, but write no Event.
  const target = request.dryRun ? undefined : eventTarget(pod, namespace);
  deps.metrics?.admitted(decision.kind === 'inject' ? 'injected' : decision.kind === 'skip' ? 'skipped' : 'refused', decision.kind === 'skip' ? decision.skip.reason : '');
  switch (decision.kind) {
    case 'inject':
      log.info({ native: decision.status.native, image: decision.status.image, injectEnv: decision.status.injectEnv }, 'sidecar injected');
      for (const note of decision.notes) log.warn(note);
      if (target) {
        deps.events?.record({
          regarding: target,
          type: 'Normal',
          reason: 'Injected',
          action: 'Inject',
          note: `Tollgate sidecar ${decision.status.image} injected into pod ${podName} (${decision.status.native ? 'native sidecar' : 'container'})`,
        });
      }
      return;
    case 'skip':
      log.debug({ reason: decision.skip.reason }, `injection skipped: ${decision.skip.message}`);
      if (target && decision.skip.report) {
        deps.events?.record({
          regarding: target,
          type: 'Normal',
          reason: 'Skipped',
          action: 'Inject',
          note: `Tollgate sidecar not injected into pod ${podName}: ${decision.skip.reason}: ${decision.skip.message}`,
        });
      }
      return;
    case 'refuse':
      log.info({ problems: decision.problems }, 'pod refused');
  }
}
