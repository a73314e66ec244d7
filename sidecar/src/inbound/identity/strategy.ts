// One way of proving who a caller is. A strategy either proves an identity, says it does not apply to this
// request (no credential of its kind), or throws TokenRejected naming why the credential it found is no good.

import type { CredentialChecks } from './credential-checks.ts';
import type { Identity, StrategyName } from './identity.ts';

export interface NotApplicable {
  readonly notApplicable: string;
}

export interface Strategy {
  readonly name: StrategyName;
  /**
   * Once this strategy applies to a request, its refusal is the answer: no later strategy is tried. IAP is
   * so: a request that came through the identity-aware proxy (or claims to) and fails its checks must not get
   * in by presenting the same or another token to a strategy that knows nothing of the proxy.
   */
  readonly decisive?: boolean;
  attempt(checks: CredentialChecks): Promise<Identity | NotApplicable>;
}

export function notApplicable(why: string): NotApplicable {
  return { notApplicable: why };
}

export function isNotApplicable(value: Identity | NotApplicable): value is NotApplicable {
  return 'notApplicable' in value;
}
