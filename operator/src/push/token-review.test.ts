import { describe, expect, it } from 'vitest';
import { identityFromReview, UnauthenticatedError } from './token-review.ts';

describe('identityFromReview', () => {
  it('takes namespace and pod from the review, not from anything the sidecar says', () => {
    expect(
      identityFromReview({
        authenticated: true,
        audiences: ['tollgate'],
        user: {
          username: 'system:serviceaccount:team-a:app',
          extra: { 'authentication.kubernetes.io/pod-name': ['app-7d9'], 'authentication.kubernetes.io/pod-uid': ['1234'] },
        },
      }),
    ).toEqual({ namespace: 'team-a', serviceAccount: 'app', podName: 'app-7d9', podUid: '1234' });
  });

  it('refuses a service-account token that is not bound to a pod', () => {
    // Minting one needs only serviceaccounts/token create, which does not otherwise grant the namespace's
    // Secrets; a pod-bound token needs pods create, which already does.
    expect(() => identityFromReview({ authenticated: true, audiences: ['tollgate'], user: { username: 'system:serviceaccount:ns:sa', extra: {} } })).toThrow(/not bound to a pod/);
    expect(() =>
      identityFromReview({
        authenticated: true,
        audiences: ['tollgate'],
        user: { username: 'system:serviceaccount:ns:sa', extra: { 'authentication.kubernetes.io/pod-name': ['p'] } },
      }),
    ).toThrow(/not bound to a pod/);
  });

  it('refuses a review that does not confirm the audience', () => {
    // An authenticated review with no status.audiences means the token is valid for the API server's own
    // audience, not for tollgate (TokenReviewStatus.audiences).
    expect(() =>
      identityFromReview({
        authenticated: true,
        user: {
          username: 'system:serviceaccount:ns:sa',
          extra: { 'authentication.kubernetes.io/pod-name': ['p'], 'authentication.kubernetes.io/pod-uid': ['u'] },
        },
      }),
    ).toThrow(/audience tollgate/);
  });

  it('refuses unauthenticated tokens, other audiences and non-service-account users', () => {
    expect(() => identityFromReview({ authenticated: false, error: 'token expired' })).toThrow(/token rejected: token expired/);
    expect(() => identityFromReview({ authenticated: true, audiences: ['other'], user: { username: 'system:serviceaccount:ns:sa' } })).toThrow(/audience tollgate/);
    expect(() => identityFromReview({ authenticated: true, user: { username: 'alice' } })).toThrow(UnauthenticatedError);
  });
});
