// The one parser for a request body that must be a JSON object. Each surface words the refusal in its own
// error type (a ProxyError on /proxy, OpenAI's error on /v1), so the caller says how to refuse.

import { isRecord } from '../../../contracts/json-record.ts';

export type JsonObjectProblem = { kind: 'syntax'; detail: string } | { kind: 'not-object' };

export function parseJsonObject(body: Buffer, refuse: (problem: JsonObjectProblem) => Error): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch (error) {
    throw refuse({ kind: 'syntax', detail: (error as Error).message });
  }
  if (!isRecord(parsed)) throw refuse({ kind: 'not-object' });
  return parsed;
}
