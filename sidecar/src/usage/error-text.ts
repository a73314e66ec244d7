// The message of an error a provider writes into a stream or body: OpenAI `{error: {type, message}}`,
// Gemini `{error: {code, status, message}}`, Anthropic `{type: 'error', error: {type, message}}`.

import { isRecord } from '../../../contracts/json-record.ts';

export function errorText(document: unknown): string {
  if (isRecord(document)) {
    const error = document.error;
    if (isRecord(error)) {
      const kind = typeof error.type === 'string' ? error.type : typeof error.status === 'string' ? error.status : undefined;
      const message = typeof error.message === 'string' ? error.message : undefined;
      if (kind && message) return `${kind}: ${message}`;
      if (message) return message;
      if (kind) return kind;
    }
    if (typeof error === 'string') return error;
  }
  return 'upstream sent an error event';
}
