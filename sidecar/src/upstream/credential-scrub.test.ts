import { describe, expect, it } from 'vitest';
import { credentialSecrets } from './credential-echo.ts';
import { CredentialScrub } from './credential-scrub.ts';

const scrubFor = (headers: Record<string, string>) => CredentialScrub.of(credentialSecrets(headers));

const KEY = 'sk-live-0123456789abcdefghij'; // 28 bytes
const MARKER = '[redacted by tollgate]******';

function run(scrub: CredentialScrub, pieces: string[]): string[] {
  const out = pieces.map((piece) => scrub.write(Buffer.from(piece)).toString());
  out.push(scrub.end().toString());
  return out;
}

describe('CredentialScrub', () => {
  it('scrubs the token of `Bearer <token>` wherever it appears, with a marker of its length', () => {
    const scrub = scrubFor({ authorization: `Bearer ${KEY}` })!;
    expect(run(scrub, [`a ${KEY} b Bearer ${KEY}`])).toEqual([`a ${MARKER} b Bearer ${MARKER}`, '']);
    expect(MARKER.length).toBe(KEY.length);
  });

  it('passes a chunk without a secret on as the same Buffer', () => {
    const scrub = scrubFor({ 'x-api-key': KEY })!;
    const chunk = Buffer.from('data: {"content":"nothing secret here, sk- is not a key"}\n\n');
    expect(scrub.write(chunk)).toBe(chunk);
  });

  it('catches a key split over several reads, holding back only the bytes that begin it', () => {
    const scrub = scrubFor({ 'x-api-key': KEY })!;
    expect(run(scrub, ['key: sk-li', 've-0123', '456789abcdefghij, done'])).toEqual(['key: ', '', `${MARKER}, done`, '']);
  });

  it('gives back held bytes that turned out not to be a key, and those left at the end', () => {
    const scrub = scrubFor({ 'x-api-key': KEY })!;
    expect(run(scrub, ['a sk-live', '-other text', 'ends with sk-'])).toEqual(['a ', 'sk-live-other text', 'ends with ', 'sk-']);
  });

  it('asks for nothing when the request carried no secret long enough to scrub', () => {
    expect(scrubFor({ 'content-type': 'application/json' })).toBeUndefined();
    expect(scrubFor({ 'x-api-key': 'short' })).toBeUndefined();
  });

  it('scrubs a rotated key, and each of two calls its own, though the secrets of a key are worked out once', () => {
    const next = 'sk-live-zyxwvutsrqponmlkjihg'; // 28 bytes, as KEY
    const first = scrubFor({ authorization: `Bearer ${KEY}` })!;
    const rotated = scrubFor({ authorization: `Bearer ${next}` })!;
    const again = scrubFor({ authorization: `Bearer ${KEY}` })!;
    expect(credentialSecrets({ authorization: `Bearer ${KEY}` })).toBe(credentialSecrets({ authorization: `Bearer ${KEY}` }));
    expect(run(rotated, [`${KEY} ${next}`])).toEqual([`${KEY} ${MARKER}`, '']);
    // A key split over reads is held back by one call's scrub only: the other's bytes are not held.
    expect(run(first, ['key: sk-li'])).toEqual(['key: ', 'sk-li']);
    expect(run(again, [`${KEY}.`])).toEqual([`${MARKER}.`, '']);
  });
});
