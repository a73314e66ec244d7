import { describe, expect, it } from 'vitest';
import { GatewayError, unsupportedParameter } from '../translate/openai-error.ts';
import { inCallerTerms } from './through-chat.ts';

const translated = { origins: ['instructions', 'input[0]', 'input[3]'], names: { max_completion_tokens: 'max_output_tokens', response_format: 'text.format' } };

describe("a route's refusal in the caller's terms", () => {
  it('names the input item a chat message came from', () => {
    const error = inCallerTerms(
      unsupportedParameter('messages[2].content[1].image_url.url', 'messages[2].content[1].image_url.url: route gamma takes images only as base64'),
      translated,
    );
    expect(error.param).toBe('input[3].content[1].image_url.url');
    expect(error.message).toBe('input[3].content[1].image_url.url: route gamma takes images only as base64');
  });

  it("names a parameter by the caller's API, and leaves the rest as it was", () => {
    expect(inCallerTerms(unsupportedParameter('response_format.json_schema.schema', 'x'), translated).param).toBe('text.format.json_schema.schema');
    const untouched = new GatewayError(400, 'model m has no id for route gamma', { param: 'model' });
    expect(inCallerTerms(untouched, translated)).toBe(untouched);
  });
});
