// Fake OpenAI audio API, checking what it receives as OpenAI does:
//   POST /v1/audio/transcriptions  multipart/form-data: file (a WAV file, with a filename), model (whisper-1,
//        gpt-4o-transcribe, gpt-4o-mini-transcribe), response_format (json | text | srt | verbose_json | vtt;
//        the gpt-4o models take json and text only), prompt?, language?, temperature?
//        → json {text, usage}; verbose_json {task, language, duration, text, segments, usage}; text/srt/vtt plain
//   POST /v1/audio/translations    the same form, whisper-1 only → json {text} (no usage, as OpenAI's);
//        verbose_json {task: "translate", language: "english", duration, text, segments}
//   POST /v1/audio/speech          JSON {model (tts-1, tts-1-hd, gpt-4o-mini-tts), input (1–4096 characters),
//        voice, response_format?, speed?, instructions? (gpt-4o-mini-tts only)} → the audio bytes, unframed
// The form is read by the platform's own multipart parser (undici's FormData), the WAV header by this file:
// neither is the proxy's code. Usage, so tests can work costs out by hand:
//   whisper-1          {type: "duration", seconds: the WAV's duration rounded up to a whole second}
//   gpt-4o-*transcribe {type: "tokens", input_tokens: audio + text, input_token_details: {text_tokens: words of
//                      the prompt, audio_tokens: 10 a second of audio, rounded up}, output_tokens: words of the
//                      transcript}
// Speech answers last one second for every 15 characters of input, rounded up: PCM at 24 kHz, 16-bit mono (48,000
// bytes a second); `wav` puts a 44-byte RIFF header before it; `mp3` is MPEG-2 Layer III frames at 64 kbit/s
// (8,000 bytes a second); other formats get the PCM bytes under their own Content-Type.

import { sendBehaviourError, sendOpenAiError } from './llm-errors.ts';
import { writeJson } from './llm-reply-writer.ts';
import { jsonObject, requestHeader } from './llm-request.ts';
import type { FakeExchange } from './llm-upstream.ts';

const TRANSCRIPT = 'The quick brown fox jumps over the lazy dog';
const TRANSCRIBE_MODELS = ['whisper-1', 'gpt-4o-transcribe', 'gpt-4o-mini-transcribe'];
const FORMATS = ['json', 'text', 'srt', 'verbose_json', 'vtt'];
const VOICES = ['alloy', 'ash', 'ballad', 'coral', 'echo', 'fable', 'onyx', 'nova', 'sage', 'shimmer', 'verse'];
const SPEECH_FORMATS: Record<string, string> = { mp3: 'audio/mpeg', opus: 'audio/opus', aac: 'audio/aac', flac: 'audio/flac', wav: 'audio/wav', pcm: 'audio/pcm' };
const PCM_BYTES_PER_SECOND = 48_000;

/** Words of a text: the fake's token count. */
const words = (text: string) => text.split(/\s+/).filter((word) => word !== '').length;

/** Seconds a WAV file declares (its data chunk over its byte rate), or null when it is not one. */
export function fakeWavSeconds(file: Buffer): number | null {
  if (file.length < 44 || file.toString('ascii', 0, 4) !== 'RIFF' || file.toString('ascii', 8, 12) !== 'WAVE') return null;
  let byteRate = 0;
  for (let at = 12; at + 8 <= file.length;) {
    const id = file.toString('ascii', at, at + 4);
    const size = file.readUInt32LE(at + 4);
    if (id === 'fmt ') byteRate = file.readUInt32LE(at + 16);
    if (id === 'data') return byteRate > 0 ? Math.min(size, file.length - at - 8) / byteRate : null;
    at += 8 + size + (size % 2);
  }
  return null;
}

/** Fields of a form, read by undici; null when the body is not multipart/form-data it can read. */
async function formOf(x: FakeExchange): Promise<FormData | null> {
  const contentType = requestHeader(x.req, 'content-type') ?? '';
  if (!contentType.startsWith('multipart/form-data')) return null;
  try {
    return await new Response(new Uint8Array(x.body), { headers: { 'content-type': contentType } }).formData();
  } catch {
    return null;
  }
}

function text(form: FormData, name: string): string | undefined {
  const value = form.get(name);
  return typeof value === 'string' ? value : undefined;
}

export async function openAiAudio(x: FakeExchange, task: 'transcribe' | 'translate'): Promise<void> {
  const reject = (message: string, param: string | null = null) => sendOpenAiError(x.res, 400, message, { param, code: null });
  const form = await formOf(x);
  if (form === null) return reject('Invalid Content-Type header: the request must be multipart/form-data.');
  const file = form.get('file');
  if (file === null || typeof file === 'string') return reject("Missing required parameter: 'file'.", 'file');
  const model = text(form, 'model');
  if (model === undefined || model === '') return reject('you must provide a model parameter', 'model');
  const models = task === 'translate' ? ['whisper-1'] : TRANSCRIBE_MODELS;
  if (!models.includes(model)) return reject(`Invalid model ${model}: this endpoint takes ${models.join(', ')}.`, 'model');
  const format = text(form, 'response_format') ?? 'json';
  const formats = model === 'whisper-1' ? FORMATS : ['json', 'text'];
  if (!formats.includes(format)) return reject(`response_format '${format}' is not compatible with model '${model}'. Use ${formats.join(' or ')}.`, 'response_format');
  const seconds = fakeWavSeconds(Buffer.from(await file.arrayBuffer()));
  if (seconds === null) return reject('Invalid file format. Supported formats: [flac, m4a, mp3, mp4, mpeg, mpga, oga, ogg, wav, webm]', 'file');
  if (x.behaviour.status !== undefined) return sendBehaviourError(x.res, x.behaviour, 'openai');
  const transcript = x.behaviour.text ?? TRANSCRIPT;
  if (format === 'text' || format === 'srt' || format === 'vtt') {
    x.res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
    x.res.end(format === 'text' ? `${transcript}\n` : `1\n00:00:00,000 --> 00:00:0${Math.ceil(seconds)},000\n${transcript}\n`);
    return;
  }
  const usage = task === 'translate' ? undefined : usageOf(model, seconds, text(form, 'prompt') ?? '', transcript);
  const answer: Record<string, unknown> =
    format === 'verbose_json'
      ? { task, language: 'english', duration: seconds, text: transcript, segments: [{ id: 0, seek: 0, start: 0, end: seconds, text: transcript }] }
      : { text: transcript };
  if (usage !== undefined) answer.usage = usage;
  writeJson(x.res, 200, answer, { 'x-request-id': 'req_fakeaudio' });
}

function usageOf(model: string, seconds: number, prompt: string, transcript: string): Record<string, unknown> {
  if (model === 'whisper-1') return { type: 'duration', seconds: Math.ceil(seconds) };
  const audio = Math.ceil(seconds * 10);
  const textTokens = words(prompt);
  const output = words(transcript);
  return {
    type: 'tokens',
    input_tokens: audio + textTokens,
    input_token_details: { text_tokens: textTokens, audio_tokens: audio },
    output_tokens: output,
    total_tokens: audio + textTokens + output,
  };
}

export function openAiSpeech(x: FakeExchange): void {
  const body = jsonObject(x.json);
  const reject = (message: string, param: string | null = null) => sendOpenAiError(x.res, 400, message, { param, code: null });
  if (body === null) return reject('We could not parse the JSON body of your request.');
  const { model, input, voice, response_format: format = 'mp3', speed, instructions } = body;
  if (model !== 'tts-1' && model !== 'tts-1-hd' && model !== 'gpt-4o-mini-tts') return reject(`Invalid model ${String(model)}.`, 'model');
  if (typeof input !== 'string' || input === '') return reject("Missing required parameter: 'input'.", 'input');
  if ([...input].length > 4096) return reject(`'input' is too long: at most 4096 characters.`, 'input');
  if (typeof voice !== 'string' || !VOICES.includes(voice)) return reject(`Invalid voice ${String(voice)}.`, 'voice');
  if (typeof format !== 'string' || SPEECH_FORMATS[format] === undefined) return reject(`Invalid response_format ${String(format)}.`, 'response_format');
  if (speed !== undefined && (typeof speed !== 'number' || speed < 0.25 || speed > 4)) return reject('speed must be between 0.25 and 4.0.', 'speed');
  if (instructions !== undefined && model !== 'gpt-4o-mini-tts') return reject(`instructions are not supported by ${model}.`, 'instructions');
  if (x.behaviour.status !== undefined) return sendBehaviourError(x.res, x.behaviour, 'openai');
  const seconds = Math.ceil([...input].length / 15);
  const pcm = format === 'mp3' ? null : speechPcm(seconds);
  const audio = pcm === null ? mp3Frames(seconds) : format === 'wav' ? Buffer.concat([wavHeader(pcm.length), pcm]) : pcm;
  // OpenAI streams speech chunked, with no length: the answer is audio as it is made.
  x.res.writeHead(200, { 'content-type': SPEECH_FORMATS[format], 'transfer-encoding': 'chunked' });
  x.res.end(audio);
}

/**
 * `seconds` of silent MP3 at 24 kHz: MPEG-2 Layer III frames of 576 samples (24 ms), mono, 64 kbit/s, each
 * 72 × 64,000 / 24,000 = 192 bytes, cut to exactly 8,000 bytes a second so tests can time it by hand.
 */
function mp3Frames(seconds: number): Buffer {
  const frame = Buffer.alloc(192);
  frame.set([0xff, 0xf3, 0x84, 0xc4]);
  return Buffer.concat(Array.from({ length: Math.ceil((seconds * 1000) / 24) }, () => frame)).subarray(0, seconds * 8_000);
}

/** `seconds` of a 440 Hz tone, 24 kHz 16-bit mono. */
function speechPcm(seconds: number): Buffer {
  const samples = seconds * (PCM_BYTES_PER_SECOND / 2);
  const pcm = Buffer.alloc(samples * 2);
  for (let i = 0; i < samples; i++) pcm.writeInt16LE(Math.round(8000 * Math.sin((2 * Math.PI * 440 * i) / 24_000)), i * 2);
  return pcm;
}

export function wavHeader(dataBytes: number, sampleRate = 24_000): Buffer {
  const header = Buffer.alloc(44);
  header.write('RIFF', 0, 'ascii');
  header.writeUInt32LE(36 + dataBytes, 4);
  header.write('WAVE', 8, 'ascii');
  header.write('fmt ', 12, 'ascii');
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20); // PCM
  header.writeUInt16LE(1, 22); // mono
  header.writeUInt32LE(sampleRate, 24);
  header.writeUInt32LE(sampleRate * 2, 28); // bytes a second
  header.writeUInt16LE(2, 32);
  header.writeUInt16LE(16, 34);
  header.write('data', 36, 'ascii');
  header.writeUInt32LE(dataBytes, 40);
  return header;
}
