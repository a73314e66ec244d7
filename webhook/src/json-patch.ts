// RFC 6902 operations as the API server accepts them from a mutating webhook, and RFC 6901 pointer escaping.

export type JsonPatchOperation = { op: 'add'; path: string; value: unknown } | { op: 'replace'; path: string; value: unknown } | { op: 'remove'; path: string };

/** One reference token of a JSON pointer: `~` becomes `~0` and `/` becomes `~1` (in that order). */
export function escapePointerToken(token: string): string {
  return token.replaceAll('~', '~0').replaceAll('/', '~1');
}

export function pointer(...tokens: Array<string | number>): string {
  return tokens.map((t) => '/' + escapePointerToken(String(t))).join('');
}
