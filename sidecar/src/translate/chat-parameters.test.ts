import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CHAT_PARAMETERS, checkChatParameters } from './chat-parameters.ts';
import { GatewayError } from './openai-error.ts';

describe('the chat-completions parameter table', () => {
  it('is documented for users: every parameter appears in docs/openai-gateway.md', () => {
    const doc = readFileSync(resolve(import.meta.dirname, '../../../docs/openai-gateway.md'), 'utf8');
    const missing = Object.keys(CHAT_PARAMETERS).filter((name) => !doc.includes(`\`${name}\``));
    expect(missing).toEqual([]);
  });

  it('gives every rejection a reason and accepts null as "not set"', () => {
    for (const [name, entry] of Object.entries(CHAT_PARAMETERS)) {
      for (const handling of Object.values(entry)) {
        if (handling.do !== 'map') expect(handling.why.length, name).toBeGreaterThan(10);
      }
    }
    expect(() => checkChatParameters({ model: 'm', messages: [], seed: null, audio: null }, 'anthropic', 'Anthropic')).not.toThrow();
  });

  it('refuses an unknown parameter the way OpenAI does', () => {
    try {
      checkChatParameters({ model: 'm', messages: [], temprature: 0.3 }, 'gemini', 'Gemini');
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(GatewayError);
      expect((error as GatewayError).toJSON()).toEqual({
        error: { message: 'Unrecognized request argument supplied: temprature', type: 'invalid_request_error', param: 'temprature', code: 'unknown_parameter' },
      });
    }
  });
});
