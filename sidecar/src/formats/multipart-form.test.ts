import { describe, expect, it } from 'vitest';
import { formField, formParts } from './multipart-form.ts';

const BOUNDARY = 'b0undary';

/** A form whose parts' Content-Disposition lines are written out as given. */
function form(parts: readonly (readonly [disposition: string, value: string])[]): Buffer {
  const text = parts.map(([disposition, value]) => `--${BOUNDARY}\r\nContent-Disposition: ${disposition}\r\n\r\n${value}\r\n`).join('');
  return Buffer.from(`${text}--${BOUNDARY}--\r\n`);
}

describe("a part's Content-Disposition, read as a multipart parser reads it", () => {
  it("takes a part's name from its own name parameter, not from text inside another parameter's quoted value", () => {
    // A server's parser sees a part named user holding dall-e-2 and a part named model holding gpt-image-1: the
    // proxy must read the same, or it meters dall-e-2 for a gpt-image-1 call.
    const body = form([
      ['form-data; note="; name=model; "; name="user"', 'dall-e-2'],
      ['form-data; note="; name=junk; "; name="model"', 'gpt-image-1'],
      ['form-data; name="image"; filename="a; name=prompt; b.png"', 'PNG'],
    ]);
    const parts = formParts(body, BOUNDARY);
    expect(parts.map((part) => [part.name, part.filename])).toEqual([
      ['user', null],
      ['model', null],
      ['image', 'a; name=prompt; b.png'],
    ]);
    expect(formField(body, parts, 'model')).toBe('gpt-image-1');
  });

  it('reads unquoted values, escaped quotes, and parameter names in any case', () => {
    const body = form([
      ['form-data; NAME=model', 'whisper-1'],
      ['form-data; name="file"; filename="say \\"hi\\".wav"', 'RIFF'],
    ]);
    expect(formParts(body, BOUNDARY).map((part) => [part.name, part.filename])).toEqual([
      ['model', null],
      ['file', 'say "hi".wav'],
    ]);
  });
});
