import type { CredentialKind } from '../../../contracts/routes.ts';

/**
 * The proxy could not obtain or attach the upstream credential. Its code matches the engine's
 * `credential_unavailable` error code, so the call becomes a 502 naming the cause. The message never
 * contains a secret.
 */
export class CredentialError extends Error {
  readonly code = 'credential_unavailable' as const;
  readonly kind: CredentialKind;

  constructor(kind: CredentialKind, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'CredentialError';
    this.kind = kind;
  }
}
