// An upstream that answers an error may quote the request it refused, credential included (a self-hosted
// OpenAI-compatible server echoing its Authorization header, a gateway's debug page). The caller must never
// see the proxy's own credential, so the values the proxy attached are scrubbed from an error's headers and
// body before either reaches the caller. Successful answers are scrubbed as their bytes pass, never collected
// (credential-scrub.ts).

import type { OutgoingHttpHeaders } from 'node:http';

/** Headers a credential provider writes whose values are secret (or, for SigV4, name the access key). */
const CREDENTIAL_HEADERS = ['authorization', 'x-api-key', 'x-goog-api-key', 'api-key', 'x-amz-security-token'] as const;
/** Shorter values are not worth scrubbing (and would match ordinary text). */
const MIN_SECRET_LENGTH = 8;
const SIGV4_KEY_ID = /Credential=([A-Za-z0-9]+)\//;
export const REDACTED = '[redacted by tollgate]';

const NO_SECRETS: readonly string[] = [];
/**
 * The secrets of recent credentials, by the one credential header value that carried them: a route's key is the
 * same on every call, and working its secrets out again cost a filter, a sort and their arrays per call. A SigV4
 * signature differs on every call and is not kept; nor is anything when the cache is full (it starts over).
 */
const SECRETS_OF = new Map<string, readonly string[]>();
const SECRETS_REMEMBERED = 32;

/** The secrets in the headers a credential provider set on an outgoing request (shared: never changed). */
export function credentialSecrets(headers: Readonly<Record<string, string>>): readonly string[] {
  let only: string | undefined;
  let count = 0;
  for (const name of CREDENTIAL_HEADERS) {
    const value = headers[name];
    if (value === undefined) continue;
    only = value;
    count++;
  }
  if (count === 0) return NO_SECRETS;
  if (count > 1 || only!.startsWith('AWS4-')) return secretsIn(headers);
  let secrets = SECRETS_OF.get(only!);
  if (secrets === undefined) {
    secrets = secretsIn(headers);
    if (SECRETS_OF.size >= SECRETS_REMEMBERED) SECRETS_OF.clear();
    SECRETS_OF.set(only!, secrets);
  }
  return secrets;
}

function secretsIn(headers: Readonly<Record<string, string>>): readonly string[] {
  const secrets: string[] = [];
  for (const name of CREDENTIAL_HEADERS) {
    const value = headers[name];
    if (value === undefined) continue;
    if (value.startsWith('AWS4-')) {
      // The signature is single-use; the access key id is what identifies the account.
      const keyId = SIGV4_KEY_ID.exec(value)?.[1];
      if (keyId !== undefined) secrets.push(keyId);
      continue;
    }
    secrets.push(value);
    const space = value.indexOf(' ');
    if (space !== -1) secrets.push(value.slice(space + 1)); // the token of `Bearer <token>`
  }
  // Longest first, so a token is replaced whole before any shorter secret inside it.
  return secrets.filter((secret) => secret.length >= MIN_SECRET_LENGTH).sort((a, b) => b.length - a.length);
}

export function scrubText(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const secret of secrets) if (out.includes(secret)) out = out.split(secret).join(REDACTED);
  return out;
}

/** The body with every secret replaced; the same Buffer when none occurs. */
export function scrubBody(body: Buffer, secrets: readonly string[]): Buffer {
  if (secrets.length === 0 || !secrets.some((secret) => body.includes(secret))) return body;
  return Buffer.from(scrubText(body.toString('utf8'), secrets));
}

/** Header values with every secret replaced (in place). */
export function scrubHeaders<T extends OutgoingHttpHeaders | Record<string, string | string[] | undefined>>(headers: T, secrets: readonly string[]): T {
  if (secrets.length === 0) return headers;
  for (const name of Object.keys(headers)) {
    const value = headers[name];
    if (typeof value === 'string') (headers as Record<string, unknown>)[name] = scrubText(value, secrets);
    else if (Array.isArray(value)) (headers as Record<string, unknown>)[name] = value.map((v) => scrubText(String(v), secrets));
  }
  return headers;
}
