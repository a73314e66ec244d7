// Providers send counts as JSON numbers; anything else (absent, null, negative, a string) counts as zero so a
// malformed field cannot turn a cost into NaN.

export function tokenCount(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? Math.floor(value) : 0;
}

/** A count from an HTTP header value (Bedrock's X-Amzn-Bedrock-*-Token-Count); undefined when absent or invalid. */
export function headerTokenCount(value: string | string[] | undefined): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (text === undefined || !/^\s*\d+\s*$/.test(text)) return undefined;
  return Number.parseInt(text, 10);
}
