// "Should this pod be skipped, and why": each reason is a named predicate, checked in order, so every skip
// has a stable reason for the log line and the Skipped Event. Shared by admission and the missing-sidecar
// watcher, which must agree on which pods were meant to get the sidecar.

import type { V1Pod } from '@kubernetes/client-node';
import { ANNOTATIONS, NAMESPACE_INJECTION_LABEL, SELFTEST_LABEL, SIDECAR_CONTAINER_NAME, SYSTEM_NAMESPACES } from './annotations.ts';

export interface PodContext {
  pod: V1Pod;
  /** The namespace the pod is created in (the AdmissionRequest's, since pod.metadata.namespace may be empty). */
  namespace: string;
  namespaceLabels: Readonly<Record<string, string>>;
  /** Tollgate's own namespace: never injected, so the webhook can never block its own pods. */
  ownNamespace: string;
}

export type SkipReason = 'SystemNamespace' | 'TollgateNamespace' | 'OptedOut' | 'NotOptedIn' | 'HostNetwork' | 'AlreadyInjected';

export interface Skip {
  reason: SkipReason;
  message: string;
  /**
   * Whether a Skipped Event is worth emitting: only when the user asked for injection and did not get it.
   * Pods that never opted in pass through the broad pod-annotation webhook entry by the thousand.
   */
  report: boolean;
}

interface SkipPredicate {
  reason: SkipReason;
  applies(ctx: PodContext): boolean;
  message(ctx: PodContext): string;
  report(ctx: PodContext): boolean;
}

export function namespaceOptedIn(ctx: Pick<PodContext, 'namespaceLabels'>): boolean {
  return ctx.namespaceLabels[NAMESPACE_INJECTION_LABEL] === 'enabled';
}

function annotation(ctx: PodContext): string | undefined {
  return ctx.pod.metadata?.annotations?.[ANNOTATIONS.inject];
}

/** True when the pod carries the sidecar: the status annotation, or a container of that name (hand-written). */
export function hasSidecar(pod: V1Pod): boolean {
  if (pod.metadata?.annotations?.[ANNOTATIONS.status] !== undefined) return true;
  const all = [...(pod.spec?.containers ?? []), ...(pod.spec?.initContainers ?? [])];
  return all.some((c) => c.name === SIDECAR_CONTAINER_NAME);
}

const PREDICATES: readonly SkipPredicate[] = [
  {
    reason: 'SystemNamespace',
    applies: (ctx) => SYSTEM_NAMESPACES.has(ctx.namespace),
    message: (ctx) => `namespace ${ctx.namespace} is a Kubernetes system namespace`,
    report: () => false,
  },
  {
    reason: 'TollgateNamespace',
    // The chart's self-test pods are the exception: they check that injection works (ADR 0812).
    applies: (ctx) => ctx.namespace === ctx.ownNamespace && ctx.pod.metadata?.labels?.[SELFTEST_LABEL] !== 'true',
    message: (ctx) => `namespace ${ctx.namespace} is Tollgate's own namespace`,
    report: () => false,
  },
  {
    reason: 'OptedOut',
    applies: (ctx) => annotation(ctx) === 'false',
    message: () => `pod annotation ${ANNOTATIONS.inject} is "false"`,
    report: (ctx) => namespaceOptedIn(ctx),
  },
  {
    reason: 'NotOptedIn',
    applies: (ctx) => annotation(ctx) !== 'true' && !namespaceOptedIn(ctx),
    message: (ctx) => `neither namespace label ${NAMESPACE_INJECTION_LABEL}=enabled on ${ctx.namespace} nor pod annotation ${ANNOTATIONS.inject}: "true"`,
    report: () => false,
  },
  {
    reason: 'HostNetwork',
    applies: (ctx) => ctx.pod.spec?.hostNetwork === true,
    message: () => 'the pod uses the host network, where the sidecar port would collide across pods',
    report: () => true,
  },
  {
    reason: 'AlreadyInjected',
    applies: (ctx) => hasSidecar(ctx.pod),
    message: () => `the pod already has the ${SIDECAR_CONTAINER_NAME} container or the ${ANNOTATIONS.status} annotation`,
    // Reinvocation lands here on every injected pod: not news.
    report: () => false,
  },
];

/** The first reason to leave this pod alone, or undefined when it should be injected. */
export function skipReason(ctx: PodContext): Skip | undefined {
  for (const p of PREDICATES) {
    if (p.applies(ctx)) return { reason: p.reason, message: p.message(ctx), report: p.report(ctx) };
  }
  return undefined;
}
