// One normalised usage shape for every provider. Extractors fill it; pricing reads it; spans store it.
// Conventions follow OpenTelemetry's gen_ai.usage.*: input counts every prompt token (cached reads and
// cache writes included), output counts every generated token (reasoning/thinking included).

export interface TokenUsage {
  /** All prompt tokens, cached reads and cache writes included. */
  inputTokens: number;
  /** All generated tokens, reasoning/thinking included. */
  outputTokens: number;
  /** Prompt tokens served from a cache (subset of inputTokens). */
  cacheReadTokens: number;
  /** Prompt tokens written to a cache (subset of inputTokens), all TTLs. */
  cacheWriteTokens: number;
  /** Of cacheWriteTokens, those written with a 1-hour TTL (Anthropic bills them at a higher rate). */
  cacheWrite1hTokens: number;
  /** Reasoning/thinking tokens (subset of outputTokens). */
  reasoningTokens: number;
  totalTokens: number;
  /** What the call billed in units other than tokens (images, seconds of audio, characters), if any (ADR 0910). */
  units?: BilledUnits;
}

/**
 * Billed units of the endpoints not priced (only) by tokens. Some are read from the answer (the images in
 * `data`, a transcription's `usage.seconds`), some only the request knows (an image's size and quality, the
 * characters of a speech input): the planned call carries those to the meter, which merges them in.
 */
export interface BilledUnits {
  /** Images generated or edited. */
  images?: number;
  /** Their size as the request named it (or the model's default), e.g. 1024x1024. */
  imageSize?: string;
  /** Their quality as the request named it (or the model's default), e.g. standard, hd. */
  imageQuality?: string;
  /** Seconds of input audio (transcriptions, translations). */
  audioSeconds?: number;
  /** Characters of input text (text to speech). */
  characters?: number;
  /** Of inputTokens, those of input images (gpt-image-*), billed at the entry's image_input_per_million. */
  imageInputTokens?: number;
}

/** What an extractor learned from one response. `usage` is null when the response carried none. */
export interface UsageResult {
  usage: TokenUsage | null;
  /** Model the upstream reports (response.model / modelVersion), if any. */
  responseModel?: string;
  /** Set when a stream ended early or a frame failed its checksum: the usage may be partial. */
  streamError?: string;
  /**
   * Events a stream carried (SSE events, event-stream frames, array elements); absent for a single JSON body.
   * What the proxy estimates output from when a stream is cut before its usage (usage-estimate.ts).
   */
  streamEvents?: number;
  /** The usage is the proxy's estimate, not the provider's report (a speech answer's audio tokens, ADR 0911). */
  usageEstimated?: boolean;
  /**
   * The cost, when the extractor priced the answer itself, part by part: a batch's results, each line at its
   * own model's batch price (ADR 0913). The call is charged this rather than its summed usage priced once.
   */
  charge?: CallCharge;
}

/** A cost worked out before the call finished, and whether every part of it had a price. */
export interface CallCharge {
  costUsd: number;
  priced: boolean;
}
