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
});
