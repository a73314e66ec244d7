import { describe, expect, it } from 'vitest';
import type { PriceEntry } from '../../../contracts/price-entry.ts';
import { speechExtractor } from './speech-estimate.ts';
import { NoUsageExtractor } from './usage-extractor.ts';

const MINI_TTS: PriceEntry = { provider: 'openai', model: 'gpt-4o-mini-tts', input_per_million: 0.6, output_per_million: 12 };
const TTS_1: PriceEntry = { provider: 'openai', model: 'tts-1', input_per_million: 0, output_per_million: 0, characters_per_million: 15 };

/** A WAV header for `dataBytes` of 24 kHz 16-bit mono (48,000 bytes a second). */
function wavHeader(dataBytes: number): Buffer {
  const header = Buffer.alloc(44);
  header.write('RIFF', 0, 'latin1');
  header.writeUInt32LE(36 + dataBytes, 4);
  header.write('WAVEfmt ', 8, 'latin1');
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20);
  header.writeUInt16LE(1, 22);
  header.writeUInt32LE(24_000, 24);
  header.writeUInt32LE(48_000, 28);
  header.writeUInt16LE(2, 32);
  header.writeUInt16LE(16, 34);
  header.write('data', 36, 'latin1');
  header.writeUInt32LE(dataBytes, 40);
  return header;
}

describe('the usage of a speech answer', () => {
  it('times a WAV answer by its bytes after the header, however it is split, and marks the usage estimated', () => {
    const extractor = speechExtractor(new NoUsageExtractor(), { characters: 100, format: 'wav' }, MINI_TTS, 200);
    const answer = Buffer.concat([wavHeader(144_000), Buffer.alloc(144_000)]);
    // Split inside the header: the head is put together before it is read.
    for (const piece of [answer.subarray(0, 10), answer.subarray(10, 30), answer.subarray(30)]) expect(extractor.write(piece)).toBe(piece);
    // 144,000 bytes / 48,000 = 3 s: ⌈3 × 1,250 / 60⌉ = 63 audio tokens; ⌈100 / 4⌉ = 25 text tokens.
    expect(extractor.end()).toEqual({ usage: expect.objectContaining({ inputTokens: 25, outputTokens: 63, totalTokens: 88 }), usageEstimated: true });
  });

  it('times an MP3 answer at its first frame’s bit rate, after an ID3 tag', () => {
    const extractor = speechExtractor(new NoUsageExtractor(), { characters: 8, format: 'mp3' }, MINI_TTS, 200);
    // A 10-byte ID3v2 header declaring 100 bytes of tag (syncsafe 0 0 0 100), then MPEG-1 Layer III at 128 kbit/s
    // (index 9): 16,000 bytes a second.
    const id3 = Buffer.concat([Buffer.from([0x49, 0x44, 0x33, 4, 0, 0, 0, 0, 0, 100]), Buffer.alloc(100)]);
    const frame = Buffer.from([0xff, 0xfb, 0x90, 0x64]);
    extractor.write(Buffer.concat([id3, frame]));
    extractor.write(Buffer.alloc(80_000 - 4));
    // 80,000 bytes after the tag: 5 s, 5 × 1,250 / 60 = 104.17 → 105 audio tokens; ⌈8 / 4⌉ = 2 text tokens.
    expect(extractor.end().usage).toMatchObject({ inputTokens: 2, outputTokens: 105 });
  });

  it('guesses an answer’s length from its text where its bytes do not say it: 15 characters a second', () => {
    const extractor = speechExtractor(new NoUsageExtractor(), { characters: 90, format: 'opus' }, MINI_TTS, 200);
    extractor.write(Buffer.alloc(5_000, 0xff));
    // 90 / 15 = 6 s: 6 × 1,250 / 60 = 125 audio tokens; ⌈90 / 4⌉ = 23 text tokens.
    expect(extractor.end().usage).toMatchObject({ inputTokens: 23, outputTokens: 125 });
  });

  it('leaves a per-character model, an unpriced one and an error answer to the route’s own extractor', () => {
    const own = new NoUsageExtractor();
    expect(speechExtractor(own, { characters: 90, format: 'mp3' }, TTS_1, 200)).toBe(own);
    expect(speechExtractor(own, { characters: 90, format: 'mp3' }, undefined, 200)).toBe(own);
    expect(speechExtractor(own, { characters: 90, format: 'mp3' }, MINI_TTS, 400)).toBe(own);
    expect(speechExtractor(own, undefined, MINI_TTS, 200)).toBe(own);
  });
});
