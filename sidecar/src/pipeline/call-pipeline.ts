// The one pipeline every inbound call runs (ADR 1700), /proxy and each /v1 API alike: admission → plan →
// budget → upstream → relay, with usage, price and the span read and written by the relay's end
// (call-outcome.ts), and every failure ending in the surface's `fail`. The surfaces differ only in their steps'
// insides: how the target is chosen (the path prefix; or the model, its alias and fallbacks), how the request
// is planned, and which error shape answers; the order, the caller's end, the drain's tracking and the
// attachment of the upstream's timing to the span are here, once.

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ProxyError } from '../errors.ts';
import type { Lifecycle } from '../lifecycle.ts';
import type { MeteredCall } from '../metering/call-meter.ts';
import type { UpstreamResponse } from '../upstream/upstream-client.ts';
import { admitCall } from './admission.ts';
import type { CallerEnd } from './caller-end.ts';

/** A planned call's upstream answer, and the plan it answers (an alias's may be a later target's). */
export interface Exchange<P> {
  plan: P;
  upstream: UpstreamResponse;
}

/**
 * One call's steps as its surface takes them; the pipeline runs them in order. `P` is what planning gives the
 * budget and upstream steps, `R` the plan an answer is relayed by (a /v1 alias plans each target as it tries it).
 */
export interface CallSteps<P, R = P> {
  /** How the caller ended the call early, if it did; made with the steps, so the body's limits can end it too. */
  readonly caller: CallerEnd;
  /** Targeting and planning: the body read within its bounds, the target chosen and planned, the span started. Throws to refuse. */
  plan(): Promise<P>;
  /** The call's span, once `plan` started it. */
  readonly span: MeteredCall | null;
  /** The budget step: true when the call was refused (its span finished, the caller answered). A promise only when the rate windows are shared. */
  budget(plan: P): boolean | Promise<boolean>;
  /** The upstream exchange; null when it ended with an answer already given (an alias's first paid target refused by the budget). */
  send(plan: P): Promise<Exchange<R> | null>;
  relay(exchange: Exchange<R>): Promise<void>;
  /** The call failed: its span (one of its own when none was started) and its answer in the surface's shape. */
  fail(error: unknown): void;
  /** Whatever the call's end, after `fail` when it failed. */
  ended?(): void;
}

/** The surface's answer to a call refused at admission (the proxy is draining), in its error shape. */
export type AdmissionAnswer = (error: ProxyError) => void;

/**
 * Runs one call through the pipeline; resolves when the call has ended (answered and its span written, or
 * failed and answered). `answerRefusal` answers a call the proxy does not admit.
 */
export async function runCall<P, R>(lifecycle: Lifecycle, request: IncomingMessage, res: ServerResponse, steps: CallSteps<P, R>, answerRefusal: AdmissionAnswer): Promise<void> {
  const done = admitCall(lifecycle, request, res, answerRefusal);
  if (done === null) return;
  try {
    const plan = await steps.plan();
    const refused = steps.budget(plan);
    if (typeof refused === 'boolean' ? refused : await refused) return;
    const exchange = await steps.send(plan);
    if (exchange === null) return;
    steps.span?.attachUpstream(exchange.upstream.timing);
    steps.caller.relaying = true;
    await steps.relay(exchange);
  } catch (error) {
    steps.fail(error);
  } finally {
    steps.ended?.();
    done();
  }
}
