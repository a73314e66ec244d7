// Who a call is for, when the caller sets no X-Tollgate-User header: the field each request format has for
// an end-user id. OpenAI's chat requests name it `user` (now `safety_identifier`); Anthropic's Messages
// requests `metadata.user_id`.

import { isRecord } from '../../../contracts/json-record.ts';

export function openAiRequestUser(request: Record<string, unknown>): string | null {
  for (const field of ['user', 'safety_identifier'] as const) {
    const value = request[field];
    if (typeof value === 'string' && value !== '') return value;
  }
  return null;
}

export function anthropicRequestUser(request: Record<string, unknown>): string | null {
  const id = isRecord(request.metadata) ? request.metadata.user_id : undefined;
  return typeof id === 'string' && id !== '' ? id : null;
}
