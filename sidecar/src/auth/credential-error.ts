/**
 * The proxy could not obtain or attach the upstream credential. Its code matches the engine's
 * `credential_unavailable` error code, so the call becomes a 502 naming the cause. The message never
 * contains a secret.
 */
export class CredentialError extends Error {
  readonly code = 'credential_unavailable' as const;
  /** The credential's id: a built-in one (openai-api-key, google-adc, …) or `route:<name>`. */
  readonly kind: string;

  constructor(kind: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'CredentialError';
    this.kind = kind;
  }
}
