// Outgoing headers are a plain record whose keys may come in any case; these keep one entry per name.

export function hasHeader(headers: Record<string, string>, name: string): boolean {
  const lower = name.toLowerCase();
  return Object.keys(headers).some((key) => key.toLowerCase() === lower);
}

/** Sets `name` (lower-cased), removing any entry that differs from it only in case. */
export function setHeader(headers: Record<string, string>, name: string, value: string): void {
  const lower = name.toLowerCase();
  for (const key of Object.keys(headers)) {
    if (key !== lower && key.toLowerCase() === lower) delete headers[key];
  }
  headers[lower] = value;
}
