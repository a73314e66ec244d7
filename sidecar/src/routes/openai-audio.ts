// OpenAI's audio API as the proxy meters it (ADR 0911), on /v1 and on the native OpenAI-format routes alike:
// a transcription or translation is a multipart upload whose `model` and `response_format` fields are read and
// whose bytes are forwarded as they came; a speech request is JSON whose `input` is counted. What a request
// must be to be metered is decided here once; each door words the refusal in its own error shape.

import { ProxyError } from '../errors.ts';
import { formBoundary, formField, formParts, mayBeTrue, MultipartProblem, RepeatedFormField, type FormPart } from '../formats/multipart-form.ts';
import { wavSeconds } from '../formats/wav-header.ts';
import { forwardedAsIs, parseRouteJson } from './native-request.ts';
import { openAiRequestUser } from './request-user.ts';
import type { AudioFacts, NativeCall, UpstreamRequestPlan } from './route-module.ts';
import { speechTokens, type SpeechAnswer } from '../usage/speech-estimate.ts';
import type { BilledUnits, TokenUsage } from '../usage/usage.ts';
import type { PriceEntry } from '../../../contracts/price-entry.ts';

export type AudioOperation = 'audio_transcription' | 'audio_translation' | 'audio_speech';

/** Where an upstream that speaks OpenAI's audio API serves each operation. */
export const OPENAI_AUDIO_PATHS: Readonly<Record<AudioOperation, string>> = {
  audio_transcription: '/v1/audio/transcriptions',
  audio_translation: '/v1/audio/translations',
  audio_speech: '/v1/audio/speech',
};

/** The native path of each audio operation, after the route's base (`/v1/audio/...`). */
const AUDIO_PATH = /\/audio\/(transcriptions|translations|speech)$/;

export function audioOperationOf(method: string, rest: string): AudioOperation | undefined {
  if (method !== 'POST') return undefined;
  const match = AUDIO_PATH.exec(rest);
  if (match === null) return undefined;
  return match[1] === 'transcriptions' ? 'audio_transcription' : match[1] === 'translations' ? 'audio_translation' : 'audio_speech';
}

/**
 * The largest upload taken: OpenAI refuses an audio file over 25 MB, and the form's other fields (model,
 * prompt, language) get 64 KiB beside it. A larger body is refused before anything is sent.
 */
export const AUDIO_UPLOAD_LIMIT_BYTES = 25 * 1024 * 1024 + 64 * 1024;

/** The longest speech input OpenAI takes, in characters. */
export const SPEECH_INPUT_LIMIT = 4096;

/**
 * Answer formats that say what the call used: a transcription's JSON carries `usage`, a translation's only
 * verbose_json, its `duration`. The others (text, srt, vtt; a translation's json) say nothing.
 */
const USAGE_FORMATS: Readonly<Record<AudioOperation, readonly string[]>> = {
  audio_transcription: ['json', 'verbose_json', 'diarized_json'],
  audio_translation: ['verbose_json'],
  audio_speech: [],
};

/** A request the audio API cannot take, or that the proxy cannot meter: what is wrong, and the field. */
export class AudioRequestError extends Error {
  readonly param: string | null;
  constructor(message: string, param: string | null) {
    super(message);
    this.param = param;
  }
}

/** What a transcription or translation upload is, for planning, metering and its budget reservation. */
export interface AudioUpload {
  model: string;
  /** Where the model's form field lies in the body (the /v1 gateway replaces a `<route>/<model>` id there). */
  modelPart: FormPart;
  /** Seconds of audio the file's WAV header declares; null for other formats. */
  seconds: number | null;
  /** Bytes of the uploaded file. */
  fileBytes: number;
  /** The answer asked for says what the call used (usage, a duration); else only a WAV header's seconds do. */
  reportsUsage: boolean;
  /** The answer's format (`response_format`, json when absent). */
  format: string;
  /** Why the answer cannot be metered (a format without usage, a stream), when it cannot, and the field that says so. */
  unmeteredBecause?: string;
  unmeteredField?: 'response_format' | 'stream';
}

export function readAudioUpload(body: Buffer | null, contentType: string | undefined, operation: AudioOperation): AudioUpload {
  const boundary = formBoundary(contentType);
  if (boundary === null) {
    const got = contentType === undefined ? 'no Content-Type' : `Content-Type ${JSON.stringify(contentType)}`;
    throw new AudioRequestError(`an audio upload must be sent as multipart/form-data with a boundary (got ${got})`, null);
  }
  if (body === null || body.length === 0) throw new AudioRequestError('the request has no body: send the audio as the form field `file`', 'file');
  if (body.length > AUDIO_UPLOAD_LIMIT_BYTES) {
    throw new AudioRequestError(`the upload is ${body.length} bytes; the most taken is ${AUDIO_UPLOAD_LIMIT_BYTES} (a 25 MiB file and 64 KiB of other fields)`, 'file');
  }
  let parts;
  try {
    parts = formParts(body, boundary);
  } catch (error) {
    if (error instanceof MultipartProblem) throw new AudioRequestError(`the multipart body could not be read: ${error.message}`, null);
    throw error;
  }
  const file = parts.find((part) => part.name === 'file' && part.filename !== null);
  if (file === undefined) throw new AudioRequestError("Missing required parameter: 'file' (a form part named file, with a filename)", 'file');
  const field = (name: string): string | undefined => {
    try {
      return formField(body, parts, name);
    } catch (error) {
      throw error instanceof RepeatedFormField ? new AudioRequestError(error.message, error.field) : error;
    }
  };
  const modelPart = parts.find((part) => part.name === 'model' && part.filename === null);
  const model = field('model');
  if (modelPart === undefined || model === undefined || model === '') throw new AudioRequestError('you must provide a model parameter', 'model');
  const format = field('response_format') ?? 'json';
  const reportsUsage = USAGE_FORMATS[operation].includes(format);
  const upload: AudioUpload = { model, modelPart, seconds: wavSeconds(body.subarray(file.start, file.end)), fileBytes: file.end - file.start, reportsUsage, format };
  // An answer that says nothing is metered by the seconds a WAV header declares; any other file cannot be.
  if (!reportsUsage && upload.seconds === null) {
    upload.unmeteredBecause = `response_format ${format} answers without usage, and only a WAV file's length is known without it; ask for ${USAGE_FORMATS[operation].join(' or ')}`;
    upload.unmeteredField = 'response_format';
  } else if (mayBeTrue(field('stream'))) {
    upload.unmeteredBecause = 'a streamed transcription (stream=true) is not metered; ask for the whole answer';
    upload.unmeteredField = 'stream';
  }
  return upload;
}

/** What a speech request is, for metering and its budget reservation. */
export interface SpeechRequest extends SpeechAnswer {
  model: string;
}

export function readSpeechRequest(request: Record<string, unknown>): SpeechRequest {
  const { model, input, response_format: format } = request;
  if (typeof model !== 'string' || model === '') throw new AudioRequestError('you must provide a model parameter', 'model');
  if (typeof input !== 'string' || input === '') throw new AudioRequestError("Missing required parameter: 'input' (the text to speak, a non-empty string)", 'input');
  const characters = [...input].length;
  if (characters > SPEECH_INPUT_LIMIT) {
    throw new AudioRequestError(`'input' is ${characters} characters long; the most taken is ${SPEECH_INPUT_LIMIT}`, 'input');
  }
  if (format !== undefined && typeof format !== 'string') throw new AudioRequestError("'response_format' must be a string", 'response_format');
  return { model, characters, format: format ?? 'mp3' };
}

/**
 * Bytes a second of an upload whose length its header does not say (anything but WAV): 128 kbit/s, a common
 * rate for compressed speech; a lower rate would make the reservation larger.
 */
const ASSUMED_UPLOAD_BYTES_PER_SECOND = 16_000;
/** Audio input tokens reserved a minute for a token-billed transcription: at $6 per million, whisper-1's $0.006. */
const RESERVED_AUDIO_TOKENS_PER_MINUTE = 1_000;
/** Output reserved for a transcript, as for any request that names no maximum (ADR 1308). */
const RESERVED_TRANSCRIPT_TOKENS = 4_096;

function usageOf(inputTokens: number, outputTokens: number, units: BilledUnits): TokenUsage {
  return { inputTokens, outputTokens, cacheReadTokens: 0, cacheWriteTokens: 0, cacheWrite1hTokens: 0, reasoningTokens: 0, totalTokens: inputTokens + outputTokens, units };
}

/** An upload's request-side facts: a WAV file's seconds are exact; a reservation guesses the others' from their size. */
export function uploadFacts(upload: AudioUpload): AudioFacts {
  const seconds = upload.seconds ?? upload.fileBytes / ASSUMED_UPLOAD_BYTES_PER_SECOND;
  const reservation = usageOf(Math.ceil((seconds * RESERVED_AUDIO_TOKENS_PER_MINUTE) / 60), RESERVED_TRANSCRIPT_TOKENS, { audioSeconds: seconds });
  const facts: AudioFacts = upload.seconds === null ? { reservation } : { units: { audioSeconds: upload.seconds }, reservation };
  if (!upload.reportsUsage) facts.unreportedFormat = upload.format;
  return facts;
}

/**
 * Why an upload whose answer reports no usage cannot be metered by its model, or undefined when it can: only a
 * WAV file's seconds bill it then, which a model priced by tokens alone (gpt-4o-transcribe) has no price for, so
 * the call would be recorded at 0 USD. A model without a price entry is unpriced whatever it answers.
 */
export function unpricedSeconds(audio: AudioFacts, model: string, entry: PriceEntry | undefined): string | undefined {
  if (audio.unreportedFormat === undefined || entry === undefined || entry.audio_per_minute !== undefined) return undefined;
  return `response_format ${audio.unreportedFormat} answers without usage, and model ${model} bills tokens, not seconds of audio (no audio_per_minute): ask for json`;
}

/** A speech request's facts: its characters (tts-1's bill), and the tokens a token-billed model's estimate starts from. */
export function speechFacts(speech: SpeechRequest): AudioFacts {
  const units = { characters: speech.characters };
  return { units, reservation: { ...speechTokens(speech.characters, null), units }, speech: { characters: speech.characters, format: speech.format } };
}

/** A native plan carrying its audio facts; the request's units reach the meter as every plan's do (ADR 0910). */
function withFacts(plan: UpstreamRequestPlan, audio: AudioFacts): UpstreamRequestPlan {
  return audio.units === undefined ? { ...plan, audio } : { ...plan, audio, units: audio.units };
}

/** The native paths whose body is an upload (a route's `formUpload`). */
export function isAudioUpload(method: string, rest: string): boolean {
  const operation = audioOperationOf(method, rest);
  return operation === 'audio_transcription' || operation === 'audio_translation';
}

/**
 * A native audio call on an OpenAI-format route: forwarded as it came, its model and operation read, and refused
 * (ProxyError invalid_request) when it is not a request the audio API takes. An answer without usage is marked
 * unmetered, so only a route that allows unmetered calls forwards it.
 */
export function planAudioNative(call: NativeCall, operation: AudioOperation, route: string): UpstreamRequestPlan {
  const path = call.rest + call.query;
  try {
    if (operation === 'audio_speech') {
      if (call.body === null || call.body.length === 0) throw new AudioRequestError('the request has no body: send the speech request as JSON', null);
      const json = parseRouteJson(call.body, route);
      const speech = readSpeechRequest(json);
      return withFacts(forwardedAsIs(path, call.body, speech.model, operation, openAiRequestUser(json)), speechFacts(speech));
    }
    const upload = readAudioUpload(call.body, call.contentType, operation);
    const plan = withFacts(forwardedAsIs(path, call.body, upload.model, operation), uploadFacts(upload));
    if (upload.unmeteredBecause !== undefined) plan.unmeteredBecause = upload.unmeteredBecause;
    return plan;
  } catch (error) {
    if (error instanceof AudioRequestError) throw new ProxyError('invalid_request', `${error.param === null ? '' : `${error.param}: `}${error.message}`);
    throw error;
  }
}
