// The one reading of a header that may repeat: its first value. Node gives string[] for a repeated header
// (set-cookie, or a caller's duplicate); the engine acts on the first.

export type HeaderRecord = Readonly<Record<string, string | string[] | undefined>>;

export function headerValue(headers: HeaderRecord, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}
