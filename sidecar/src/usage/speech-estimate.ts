// The tokens a speech call stands for when its model bills tokens (gpt-4o-mini-tts: text in, audio out) but its
// answer is audio bytes with no usage (ADR 0911). Both counts are estimates, marked so on the span:
//   - input: the text at four characters a token, the rule every other estimate here uses (usage-estimate.ts);
//   - output: OpenAI's own estimate of $0.015 a minute at $12 per million audio tokens, 1,250 tokens a minute of
//     the answer. A PCM or WAV answer's minutes are its bytes (24 kHz 16-bit mono, 48,000 bytes a second, as
//     OpenAI documents pcm; a WAV header's own byte rate), an MP3 answer's its bytes at its first frame's bit
//     rate; opus, aac and flac are not known without decoding them, so they are the input's characters at 15 a
//     second (about 150 spoken words a minute).
// A model billed per character (tts-1, tts-1-hd) needs none of this: its characters are exact.

import { mp3Stream } from '../formats/mp3-frame.ts';
import { wavLayout } from '../formats/wav-header.ts';
import type { PriceEntry } from '../../../contracts/price-entry.ts';
import type { TokenUsage, UsageResult } from './usage.ts';
import { NO_BYTES, type UsageExtractor } from './usage-extractor.ts';

/** What a speech answer's usage is estimated from, for a model that bills tokens. */
export interface SpeechAnswer {
  /** Characters of `input` (Unicode code points), what tts-1 bills. */
  characters: number;
  /** The answer's audio format (mp3 unless the request names another). */
  format: string;
}

const CHARACTERS_PER_TOKEN = 4;
const AUDIO_TOKENS_PER_MINUTE = 1_250;
const SPOKEN_CHARACTERS_PER_SECOND = 15;
const PCM_BYTES_PER_SECOND = 48_000;
/** Enough of an answer to find a WAV file's format chunk, or an MP3 stream's first frame after a small ID3 tag. */
const HEAD_BYTES = 4096;

/** Seconds of speech an answer of `bytes` in `format` holds, or null when only decoding it would tell. */
function answerSeconds(format: string, bytes: number, head: Buffer): number | null {
  if (format === 'pcm') return bytes / PCM_BYTES_PER_SECOND;
  if (format === 'wav') {
    const wav = wavLayout(head);
    return wav === null ? null : Math.max(0, bytes - wav.dataOffset) / wav.byteRate;
  }
  if (format !== 'mp3') return null;
  const mp3 = mp3Stream(head);
  return mp3 === null ? null : Math.max(0, bytes - mp3.offset) / mp3.bytesPerSecond;
}

/** The estimated usage of a speech call: its text in, and its audio out (`seconds` when the answer's are known). */
export function speechTokens(characters: number, seconds: number | null): TokenUsage {
  const spoken = seconds ?? characters / SPOKEN_CHARACTERS_PER_SECOND;
  const inputTokens = Math.ceil(characters / CHARACTERS_PER_TOKEN);
  const outputTokens = Math.ceil((spoken * AUDIO_TOKENS_PER_MINUTE) / 60);
  return { inputTokens, outputTokens, cacheReadTokens: 0, cacheWriteTokens: 0, cacheWrite1hTokens: 0, reasoningTokens: 0, totalTokens: inputTokens + outputTokens };
}

/**
 * Reads a speech answer for a token-billed model: the audio passes through the route's extractor (which scrubs
 * and finds no usage in it) and is counted, and at its end the estimate above is the call's usage, marked
 * estimated. The answer is read to its end even when the caller leaves: the provider made all of it.
 */
class SpeechUsageExtractor implements UsageExtractor {
  readonly sawEnd = false;
  readonly #inner: UsageExtractor;
  readonly #speech: SpeechAnswer;
  #bytes = 0;
  #head: Buffer = NO_BYTES;

  constructor(inner: UsageExtractor, speech: SpeechAnswer) {
    this.#inner = inner;
    this.#speech = speech;
  }

  write(chunk: Buffer): Buffer {
    const out = this.#inner.write(chunk);
    if (this.#head.length < HEAD_BYTES) this.#head = Buffer.concat([this.#head, out.subarray(0, HEAD_BYTES - this.#head.length)]);
    this.#bytes += out.length;
    return out;
  }

  flush(): Buffer {
    const held = this.#inner.flush();
    this.#bytes += held.length;
    return held;
  }

  end(streamError?: string): UsageResult {
    const result = this.#inner.end(streamError);
    const usage = speechTokens(this.#speech.characters, answerSeconds(this.#speech.format, this.#bytes, this.#head));
    return { ...result, usage, usageEstimated: true };
  }
}

/**
 * The extractor a speech answer is read with: with the estimate above when its model bills tokens (its price
 * entry has no per-character price), else the route's own, the request's characters being the bill.
 */
export function speechExtractor(extractor: UsageExtractor, speech: SpeechAnswer | undefined, entry: PriceEntry | undefined, statusCode: number): UsageExtractor {
  if (speech === undefined || statusCode >= 400 || entry === undefined || entry.characters_per_million !== undefined) return extractor;
  return new SpeechUsageExtractor(extractor, speech);
}
