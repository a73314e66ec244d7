// Ids the gateway makes up where a provider has none: completion ids of translated streams, tool-call ids of
// Gemini function calls (which carry no id), in OpenAI's style.

import { randomBytes } from 'node:crypto';

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

export function randomId(length: number): string {
  let out = '';
  for (const byte of randomBytes(length)) out += ALPHABET[byte % ALPHABET.length];
  return out;
}
