// The one test for "a JSON object" (not null, not an array) that every parser of untrusted JSON starts from:
// config bodies, price entries, provider responses, chat requests.

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
