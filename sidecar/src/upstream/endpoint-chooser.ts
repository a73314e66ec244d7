// Which of a route's endpoints takes a call (ADR 0008). An endpoint whose breaker is open, that is cooling down
// after a 429, or that this call already tried is skipped; among the rest, `weighted` is smooth weighted round
// robin (nginx's: deterministic, and it interleaves, 3:1 gives a a b a rather than a a a b), and
// `least-outstanding` takes the fewest calls in flight per unit of weight, ties shared by the same round robin.
// Nothing here allocates: it runs on every call of a route with endpoints.

import type { EndpointStrategy } from '../../../contracts/route-endpoints.ts';

/** What the chooser reads and keeps of one endpoint across calls (and configs: the state outlives a weight change). */
export interface EndpointLoad {
  /** Calls sent and not yet settled (a stream counts until it ends). */
  outstanding: number;
  /** Smooth weighted round robin's running weight. */
  current: number;
  /** Epoch ms until which the endpoint is cooling down after a 429; 0 when it is not. */
  coolingUntil: number;
  readonly breaker: { available(): boolean };
}

export interface ChoosableEndpoint {
  readonly weight: number;
  readonly load: EndpointLoad;
}

/** Whether the endpoint may take a call now; `excluded` is a bit mask of the endpoints this call tried. */
function candidate(endpoint: ChoosableEndpoint, index: number, excluded: number, now: number): boolean {
  return (excluded & (1 << index)) === 0 && endpoint.load.coolingUntil <= now && endpoint.load.breaker.available();
}

/** Whether any endpoint could take the call now, without moving the round robin. */
export function anyAvailable(endpoints: readonly ChoosableEndpoint[], excluded: number, now: number): boolean {
  for (let i = 0; i < endpoints.length; i++) if (candidate(endpoints[i]!, i, excluded, now)) return true;
  return false;
}

/** The index of the endpoint that takes the call, or -1 when none can. At most 31 endpoints (the bit mask). */
export function chooseEndpoint(endpoints: readonly ChoosableEndpoint[], strategy: EndpointStrategy, excluded: number, now: number): number {
  if (strategy === 'weighted') return roundRobin(endpoints, excluded, now, Number.POSITIVE_INFINITY);
  let least = Number.POSITIVE_INFINITY;
  for (let i = 0; i < endpoints.length; i++) {
    const endpoint = endpoints[i]!;
    if (candidate(endpoint, i, excluded, now)) least = Math.min(least, endpoint.load.outstanding / endpoint.weight);
  }
  return least === Number.POSITIVE_INFINITY ? -1 : roundRobin(endpoints, excluded, now, least);
}

/** Smooth weighted round robin among the candidates whose load per weight is at most `within`. */
function roundRobin(endpoints: readonly ChoosableEndpoint[], excluded: number, now: number, within: number): number {
  let total = 0;
  let best = -1;
  for (let i = 0; i < endpoints.length; i++) {
    const endpoint = endpoints[i]!;
    if (!candidate(endpoint, i, excluded, now) || endpoint.load.outstanding / endpoint.weight > within) continue;
    endpoint.load.current += endpoint.weight;
    total += endpoint.weight;
    if (best === -1 || endpoint.load.current > endpoints[best]!.load.current) best = i;
  }
  if (best !== -1) endpoints[best]!.load.current -= total;
  return best;
}
