import { describe, expect, it } from 'vitest';
import { DuplicateKeyError, parseJsonWithUniqueKeys } from './unique-key-json.ts';

function refusal(text: string): string {
  try {
    parseJsonWithUniqueKeys(text);
  } catch (error) {
    expect(error).toBeInstanceOf(DuplicateKeyError);
    return (error as Error).message;
  }
  throw new Error(`accepted ${text}`);
}

describe('parseJsonWithUniqueKeys', () => {
  it('parses what JSON.parse parses when no object repeats a key', () => {
    const text = '{"a":{"a":1,"b":[{"a":2},{"a":3}]},"b":"{\\"a\\":1,\\"a\\":2}","c":[1,"x",null,true]}';
    expect(parseJsonWithUniqueKeys(text)).toEqual(JSON.parse(text));
    expect(parseJsonWithUniqueKeys('[1,2]')).toEqual([1, 2]);
    expect(parseJsonWithUniqueKeys('"{"')).toBe('{');
  });

  it('refuses a repeated key and names the object it is in', () => {
    expect(refusal('{"pricing":{},"pricing":{}}')).toBe('the body has the key "pricing" twice; each key may appear once');
    expect(refusal('{"pricing":{"models":[{"model":"a"},{"model":"b","input_per_million":1,"input_per_million":2}]}}')).toBe(
      'pricing.models[1] has the key "input_per_million" twice; each key may appear once',
    );
    expect(refusal('{"upstreams":{"beta":{"baseUrl":"http://a"},"gamma":{},"beta":{}}}')).toBe('upstreams has the key "beta" twice; each key may appear once');
  });

  it('compares keys as decoded, so an escaped spelling is the same key', () => {
    expect(refusal('{"breaker":{"openMs":10,"open\\u004ds":20}}')).toBe('breaker has the key "openMs" twice; each key may appear once');
  });

  it('still reports a syntax error as JSON.parse does', () => {
    expect(() => parseJsonWithUniqueKeys('{"a":')).toThrow(SyntaxError);
  });
});
