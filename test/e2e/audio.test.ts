// OpenAI's audio API as its users meet it (ADR 0911): the official `openai` SDK's audio.transcriptions.create,
// audio.translations.create and audio.speech.create, unmodified, against a real `tollgate proxy` whose beta route
// reaches the fake OpenAI (test/fakes/llm-audio.ts, which reads the upload with undici's own multipart parser
// and checks every field), on /v1 and on the native route. Each call's span is read back and its units and cost
// checked against numbers worked out by hand below.
//
// The upload: a WAV file this test writes, 24 kHz 16-bit mono (48,000 bytes a second), 2.5 s of samples
// (120,000 bytes after its 44-byte header). The fake reports:
//   whisper-1           usage {type: duration, seconds: 3} (2.5 s rounded up)
//   gpt-4o-transcribe   audio tokens 10 a second = 25, text tokens = words of the prompt, output = 9 words
//                       ("The quick brown fox jumps over the lazy dog")
//   a translation       {text} only, no usage: the WAV header's 2.5 s are the bill
// Speech answers last one second for every 15 characters of input (rounded up): PCM at 48,000 bytes a second,
// MP3 at 64 kbit/s (8,000 bytes a second).
//
// Prices (built in): whisper-1 0.006 USD a minute = 0.0001 a second; gpt-4o-transcribe 6 per million input
// tokens (its audio rate), 10 per million output; tts-1 15 per million characters; gpt-4o-mini-tts 0.6 per
// million input tokens, 12 per million output.

import OpenAI, { APIError, toFile } from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { findSpan } from '../support/spans.ts';
import { wavHeader } from '../fakes/llm-audio.ts';
import type { SpanJson } from '../../sidecar/src/spans/span-json.ts';
import { startProxyProcess, type ProxyProcess } from './proxy-process.ts';
import { OPENAI_KEY, startUpstreamBed, type UpstreamBed } from './upstream-bed.ts';

let bed: UpstreamBed;
let proxy: ProxyProcess;
let v1: OpenAI;
let native: OpenAI;

/** 2.5 s of a 440 Hz tone, 24 kHz 16-bit mono, as a WAV file. */
function wavFile(): Buffer {
  const samples = 60_000;
  const pcm = Buffer.alloc(samples * 2);
  for (let i = 0; i < samples; i++) pcm.writeInt16LE(Math.round(6000 * Math.sin((2 * Math.PI * 440 * i) / 24_000)), i * 2);
  return Buffer.concat([wavHeader(pcm.length), pcm]);
}
const WAV = wavFile();

beforeAll(async () => {
  bed = await startUpstreamBed();
  proxy = await startProxyProcess({
    configYaml: bed.configYaml(`routes:
  - name: groq
    format: openai-chat
    baseUrl: "${bed.openai.url}"
    credential: { kind: api-key, env: GROQ_API_KEY }
pricing:
  models:
    - { provider: groq, model: whisper-1, input_per_million: 0, output_per_million: 0, audio_per_minute: 0.0012 }
budgets:
  policies:
    - { name: frugal, users: ["frugal"], limitUsd: 0.001, period: month, enforcement: block }
`),
    env: { ...bed.env, GROQ_API_KEY: OPENAI_KEY },
  });
  const headers = { 'x-tollgate-user': 'alice' };
  v1 = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'unused', maxRetries: 0, defaultHeaders: headers });
  native = new OpenAI({ baseURL: `${proxy.url}/proxy/beta/v1`, apiKey: 'unused', maxRetries: 0, defaultHeaders: headers });
});

afterAll(async () => {
  await proxy?.stop();
  await bed?.close();
});

beforeEach(() => bed.reset());

async function spanOf(response: Response): Promise<SpanJson> {
  const spanId = response.headers.get('x-proxy-span-id');
  expect(spanId).toMatch(/^[0-9a-f]{16}$/);
  return findSpan(proxy.url, { spanId });
}

/** The form the fake received, read by undici. */
async function receivedForm(): Promise<FormData> {
  const request = bed.openai.requests.at(-1)!;
  return new Response(new Uint8Array(request.body), { headers: { 'content-type': String(request.headers['content-type']) } }).formData();
}

const wav = () => toFile(WAV, 'hello.wav', { type: 'audio/wav' });

describe('transcriptions and translations with the official openai SDK', () => {
  it('meters whisper-1 on /v1 by the seconds its answer reports; the upload reaches OpenAI byte for byte', async () => {
    const { data, response } = await v1.audio.transcriptions.create({ file: await wav(), model: 'whisper-1' }).withResponse();
    expect(data.text).toBe('The quick brown fox jumps over the lazy dog');
    expect(bed.openai.requests.at(-1)!.path).toBe('/v1/audio/transcriptions');
    expect(bed.openai.requests.at(-1)!.headers.authorization).toBe(`Bearer ${OPENAI_KEY}`);
    const file = (await receivedForm()).get('file') as File;
    expect(file.name).toBe('hello.wav');
    expect(Buffer.from(await file.arrayBuffer()).equals(WAV)).toBe(true);
    const span = await spanOf(response);
    // 3 s × 0.0001 USD = 0.0003 USD.
    expect(span).toMatchObject({
      name: 'audio_transcription whisper-1',
      route: 'beta',
      model: 'whisper-1',
      status: 'ok',
      audio_seconds: 3,
      input_tokens: 0,
      priced: true,
      user_id: 'alice',
    });
    expect(span.cost_usd).toBeCloseTo(0.0003, 12);
  });

  it('meters gpt-4o-transcribe by its tokens, every input token at the audio rate', async () => {
    const { response } = await v1.audio.transcriptions.create({ file: await wav(), model: 'gpt-4o-transcribe', prompt: 'Names: Tollgate' }).withResponse();
    expect((await receivedForm()).get('prompt')).toBe('Names: Tollgate');
    const span = await spanOf(response);
    // input 25 audio + 2 text = 27 tokens × 6 / 10⁶ = 0.000162; output 9 × 10 / 10⁶ = 0.00009; 0.000252 USD.
    expect(span).toMatchObject({ model: 'gpt-4o-transcribe', input_tokens: 27, output_tokens: 9, audio_seconds: 2.5, usage_estimated: false, priced: true });
    expect(span.cost_usd).toBeCloseTo(0.000252, 12);
  });

  it('meters a translation, whose answer reports nothing, by its WAV header: 2.5 s', async () => {
    const { data, response } = await v1.audio.translations.create({ file: await wav(), model: 'whisper-1' }).withResponse();
    expect(data.text).toBe('The quick brown fox jumps over the lazy dog');
    expect(bed.openai.requests.at(-1)!.path).toBe('/v1/audio/translations');
    const span = await spanOf(response);
    // 2.5 s × 0.0001 USD = 0.00025 USD.
    expect(span).toMatchObject({ name: 'audio_translation whisper-1', audio_seconds: 2.5, priced: true });
    expect(span.cost_usd).toBeCloseTo(0.00025, 12);
  });

  it("reaches a configured OpenAI-compatible route's model as <route>/<model>, only the model field's bytes replaced", async () => {
    const { response } = await v1.audio.transcriptions.create({ file: await wav(), model: 'groq/whisper-1', response_format: 'verbose_json' }).withResponse();
    const form = await receivedForm();
    expect(form.get('model')).toBe('whisper-1');
    expect(Buffer.from(await (form.get('file') as File).arrayBuffer()).equals(WAV)).toBe(true);
    const span = await spanOf(response);
    // The route's own price: 3 s × 0.0012 / 60 = 0.00006 USD.
    expect(span).toMatchObject({ name: 'audio_transcription whisper-1', route: 'groq', provider: 'groq', audio_seconds: 3, priced: true });
    expect(span.cost_usd).toBeCloseTo(0.00006, 12);
  });

  it('meters the same calls on the native route /proxy/beta', async () => {
    const { data, response } = await native.audio.transcriptions.create({ file: await wav(), model: 'whisper-1', response_format: 'verbose_json' }).withResponse();
    expect(data.duration).toBe(2.5);
    expect(bed.openai.requests.at(-1)!.path).toBe('/v1/audio/transcriptions');
    const span = await spanOf(response);
    expect(span).toMatchObject({ name: 'audio_transcription whisper-1', route: 'beta', audio_seconds: 3, unmetered: false });
    expect(span.cost_usd).toBeCloseTo(0.0003, 12);

    const translated = await native.audio.translations.create({ file: await wav(), model: 'whisper-1', response_format: 'verbose_json' }).withResponse();
    // A verbose translation reports its duration: 2.5 s, 0.00025 USD.
    const translation = await spanOf(translated.response);
    expect(translation).toMatchObject({ name: 'audio_translation whisper-1', audio_seconds: 2.5 });
    expect(translation.cost_usd).toBeCloseTo(0.00025, 12);
  });
});

describe('speech with the official openai SDK', () => {
  it('streams tts-1 audio back and meters its input characters', async () => {
    const input = 'Hello from the toll gate.'; // 25 characters
    const { data, response } = await v1.audio.speech.create({ model: 'tts-1', voice: 'alloy', input }).withResponse();
    // 25 characters: 2 seconds of MP3 at 64 kbit/s, 16,000 bytes.
    expect(data.headers.get('content-type')).toBe('audio/mpeg');
    expect((await data.arrayBuffer()).byteLength).toBe(16_000);
    expect(bed.openai.requests.at(-1)!.json).toEqual({ model: 'tts-1', voice: 'alloy', input });
    const span = await spanOf(response);
    // 25 × 15 / 10⁶ = 0.000375 USD; nothing estimated.
    expect(span).toMatchObject({ name: 'audio_speech tts-1', characters: 25, input_tokens: 0, output_tokens: 0, usage_estimated: false, priced: true });
    expect(span.cost_usd).toBeCloseTo(0.000375, 12);
  });

  it('times an MP3 answer of gpt-4o-mini-tts by its frames’ bit rate', async () => {
    const input = 'An MP3 answer, the default format.'; // 34 characters: 3 s, 24,000 bytes
    const { data, response } = await v1.audio.speech.create({ model: 'gpt-4o-mini-tts', voice: 'coral', input }).withResponse();
    expect((await data.arrayBuffer()).byteLength).toBe(24_000);
    const span = await spanOf(response);
    // input ⌈34 / 4⌉ = 9 tokens × 0.6 / 10⁶ = 0.0000054; 24,000 bytes at 8,000 a second = 3 s, 3 × 1,250 / 60 = 62.5 →
    // 63 audio tokens × 12 / 10⁶ = 0.000756; 0.0007614 USD.
    expect(span).toMatchObject({ characters: 34, input_tokens: 9, output_tokens: 63, usage_estimated: true });
    expect(span.cost_usd).toBeCloseTo(0.0007614, 12);
  });

  it('estimates gpt-4o-mini-tts tokens from its input and the length of its PCM answer, marked estimated', async () => {
    const input = 'Thirty characters of speech!!'; // 29 characters
    const { data, response } = await native.audio.speech.create({ model: 'gpt-4o-mini-tts', voice: 'coral', input, response_format: 'pcm' }).withResponse();
    expect((await data.arrayBuffer()).byteLength).toBe(96_000);
    const span = await spanOf(response);
    // input ⌈29 / 4⌉ = 8 tokens × 0.6 / 10⁶ = 0.0000048; the answer is 96,000 / 48,000 = 2 s, ⌈2 × 1,250 / 60⌉ = 42
    // audio tokens × 12 / 10⁶ = 0.000504; 0.0005088 USD.
    expect(span).toMatchObject({ name: 'audio_speech gpt-4o-mini-tts', route: 'beta', characters: 29, input_tokens: 8, output_tokens: 42, usage_estimated: true, priced: true });
    expect(span.cost_usd).toBeCloseTo(0.0005088, 12);
  });
});

describe('requests the audio API or the meter cannot take', () => {
  /** A multipart POST the SDK would not send; returns the status and the parsed body. */
  async function postForm(path: string, form: FormData): Promise<{ status: number; body: { error: { message: string; param?: string | null; code: string | null } } }> {
    const response = await fetch(`${proxy.url}${path}`, { method: 'POST', body: form });
    return { status: response.status, body: (await response.json()) as never };
  }

  it('refuses an upload without a file part, in OpenAI’s shape on /v1, with no upstream call', async () => {
    const form = new FormData();
    form.set('model', 'whisper-1');
    const { status, body } = await postForm('/v1/audio/transcriptions', form);
    expect(status).toBe(400);
    expect(body.error).toMatchObject({ param: 'file' });
    expect(body.error.message).toContain("'file'");
    const native = await postForm('/proxy/beta/v1/audio/transcriptions', form);
    expect(native.status).toBe(400);
    expect(native.body.error.message).toContain("'file'");
    expect(bed.openai.requests).toHaveLength(0);
  });

  it('refuses an upload over 25 MiB and 64 KiB before sending it', async () => {
    const form = new FormData();
    form.set('model', 'whisper-1');
    form.set('file', new Blob([Buffer.alloc(25 * 1024 * 1024 + 64 * 1024)], { type: 'audio/wav' }), 'long.wav');
    const { status, body } = await postForm('/v1/audio/transcriptions', form);
    expect(status).toBe(400);
    expect(body.error).toMatchObject({ param: 'file' });
    expect(body.error.message).toContain('the most taken is 26279936');
    expect(bed.openai.requests).toHaveLength(0);
  });

  it('refuses a text transcript of a file whose length only the answer could tell: 400 on /v1, unmetered on /proxy', async () => {
    const form = new FormData();
    form.set('model', 'whisper-1');
    form.set('response_format', 'text');
    form.set('file', new Blob([Buffer.from('ID3 not a wav file')], { type: 'audio/mpeg' }), 'talk.mp3');
    const { status, body } = await postForm('/v1/audio/transcriptions', form);
    expect(status).toBe(400);
    expect(body.error).toMatchObject({ param: 'response_format' });
    const native = await postForm('/proxy/beta/v1/audio/transcriptions', form);
    expect(native.status).toBe(403);
    expect(native.body.error.code).toBe('unmetered_endpoint');
    expect(bed.openai.requests).toHaveLength(0);
  });

  it('refuses a text transcript by a token-billed model even of a WAV: its seconds price nothing, so only usage would bill it', async () => {
    // gpt-4o-transcribe bills audio tokens (6 USD a million), which a text answer does not report; the WAV's 2.5 s
    // have no price for it (no audio_per_minute), so the call would be recorded unpriced at 0 USD.
    const form = new FormData();
    form.set('model', 'gpt-4o-transcribe');
    form.set('response_format', 'text');
    form.set('file', new Blob([WAV], { type: 'audio/wav' }), 'hello.wav');
    const { status, body } = await postForm('/v1/audio/transcriptions', form);
    expect(status).toBe(400);
    expect(body.error).toMatchObject({ param: 'response_format' });
    const native = await postForm('/proxy/beta/v1/audio/transcriptions', form);
    expect(native.status).toBe(403);
    expect(native.body.error.code).toBe('unmetered_endpoint');
    expect(native.body.error.message).toContain('response_format text');
    expect(bed.openai.requests).toHaveLength(0);
  });

  it('refuses a streamed transcription, naming stream', async () => {
    const form = new FormData();
    form.set('model', 'gpt-4o-transcribe');
    form.set('stream', 'true');
    form.set('file', new Blob([WAV], { type: 'audio/wav' }), 'hello.wav');
    const { status, body } = await postForm('/v1/audio/transcriptions', form);
    expect(status).toBe(400);
    expect(body.error).toMatchObject({ param: 'stream' });
    expect(bed.openai.requests).toHaveLength(0);
  });

  it('refuses a speech input that is empty or over 4,096 characters', async () => {
    const empty = await v1.audio.speech.create({ model: 'tts-1', voice: 'alloy', input: '' }).catch((error: unknown) => error);
    expect(empty).toBeInstanceOf(APIError);
    expect((empty as APIError).status).toBe(400);
    expect((empty as APIError).param).toBe('input');
    const long = await v1.audio.speech.create({ model: 'tts-1', voice: 'alloy', input: 'a'.repeat(4097) }).catch((error: unknown) => error);
    expect((long as APIError).status).toBe(400);
    expect((long as APIError).message).toContain('4097 characters');
    expect(bed.openai.requests).toHaveLength(0);
  });

  it('refuses an upload its caller’s budget cannot hold, priced by its WAV header, before it goes out', async () => {
    // 2.5 s of whisper-1 are reserved at 0.00025 USD, within the 0.001 USD policy; 60 s are 0.006 USD, beyond it.
    const minute = Buffer.concat([wavHeader(48_000 * 60), Buffer.alloc(48_000 * 60)]);
    const error = await native.audio.transcriptions
      .create({ file: await toFile(minute, 'minute.wav', { type: 'audio/wav' }), model: 'whisper-1' }, { headers: { 'x-tollgate-user': 'frugal' } })
      .catch((caught: unknown) => caught);
    expect((error as APIError).status).toBe(429);
    expect(bed.openai.requests).toHaveLength(0);
  });

  it('refuses a speech call its caller’s budget cannot hold, before it goes out', async () => {
    // 1,000 characters of tts-1 are reserved at 1,000 × 15 / 10⁶ = 0.015 USD; the policy allows 0.001.
    const error = await v1.audio.speech
      .create({ model: 'tts-1', voice: 'alloy', input: 'x'.repeat(1000) }, { headers: { 'x-tollgate-user': 'frugal' } })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(APIError);
    expect((error as APIError).status).toBe(429);
    expect((error as APIError).code).toBe('budget_exceeded');
    expect(bed.openai.requests).toHaveLength(0);
  });
});
