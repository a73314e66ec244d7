// Who is on the other end of a push stream: the TokenReview API's verdict on the sidecar's projected
// service-account token (audience tollgate). The namespace comes from the service-account user name and the
// pod from the token's bound-object claims; nothing the sidecar says about itself is trusted. Only tokens
// bound to a pod are accepted: minting an unbound one needs just `serviceaccounts/token create`, which does
// not otherwise let its holder read the namespace's Secrets, whereas creating a pod already does.

import type { KubeApi } from '../../../kube-client/api-client.ts';

export const TOKEN_AUDIENCE = 'tollgate';

export interface SidecarIdentity {
  namespace: string;
  serviceAccount: string;
  podName: string;
  podUid: string;
}

export class UnauthenticatedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnauthenticatedError';
  }
}

interface TokenReviewStatus {
  authenticated?: boolean;
  error?: string;
  audiences?: string[];
  user?: { username?: string; uid?: string; groups?: string[]; extra?: Record<string, string[]> };
}

const SERVICE_ACCOUNT_USER = /^system:serviceaccount:([a-z0-9]([-a-z0-9]*[a-z0-9])?):([a-z0-9]([-a-z0-9.]*[a-z0-9])?)$/;

/** Pure: turns a TokenReview status into an identity, or throws UnauthenticatedError saying why. */
export function identityFromReview(status: TokenReviewStatus, audience: string = TOKEN_AUDIENCE): SidecarIdentity {
  if (!status.authenticated) throw new UnauthenticatedError(`token rejected${status.error ? `: ${status.error}` : ''}`);
  // No audiences in an authenticated review means "valid for the API server itself", not for us.
  if (!status.audiences?.includes(audience)) throw new UnauthenticatedError(`token is not for audience ${audience}`);
  const match = SERVICE_ACCOUNT_USER.exec(status.user?.username ?? '');
  if (!match) throw new UnauthenticatedError(`token does not belong to a service account (user ${JSON.stringify(status.user?.username ?? '')})`);
  const extra = status.user?.extra ?? {};
  const podName = extra['authentication.kubernetes.io/pod-name']?.[0];
  const podUid = extra['authentication.kubernetes.io/pod-uid']?.[0];
  if (!podName || !podUid) {
    throw new UnauthenticatedError(`token of service account ${match[1]}/${match[3]} is not bound to a pod; use the pod's projected token`);
  }
  return { namespace: match[1]!, serviceAccount: match[3]!, podName, podUid };
}

export async function reviewToken(api: KubeApi, token: string, audience: string = TOKEN_AUDIENCE): Promise<SidecarIdentity> {
  const review = await api.post<{ status?: TokenReviewStatus }>('/apis/authentication.k8s.io/v1/tokenreviews', {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenReview',
    spec: { token, audiences: [audience] },
  });
  return identityFromReview(review.status ?? {}, audience);
}
