import { describe, expect, it } from 'vitest';
import { formBoundary, formParts } from '../formats/multipart-form.ts';
import { AudioRequestError, readAudioUpload, readSpeechRequest, speechFacts, uploadFacts } from './openai-audio.ts';

/** A form as a client writes it; the file part's bytes given. */
function form(boundary: string, fields: Record<string, string>, file?: { name: string; bytes: Buffer }): Buffer {
  const parts: Buffer[] = [];
  if (file) {
    parts.push(
      Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${file.name}"\r\nContent-Type: audio/wav\r\n\r\n`),
      file.bytes,
      Buffer.from('\r\n'),
    );
  }
  for (const [name, value] of Object.entries(fields)) parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`));
  parts.push(Buffer.from(`--${boundary}--\r\n`));
  return Buffer.concat(parts);
}

/** A WAV header for `dataBytes` of 16 kHz 16-bit mono (32,000 bytes a second), and those bytes. */
function wav(dataBytes: number): Buffer {
  const header = Buffer.alloc(44);
  header.write('RIFFxxxxWAVEfmt ', 0, 'latin1');
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20);
  header.writeUInt16LE(1, 22);
  header.writeUInt32LE(16_000, 24);
  header.writeUInt32LE(32_000, 28);
  header.writeUInt16LE(2, 32);
  header.writeUInt16LE(16, 34);
  header.write('data', 36, 'latin1');
  header.writeUInt32LE(dataBytes, 40);
  return Buffer.concat([header, Buffer.alloc(dataBytes, 1)]);
}

const TYPE = 'multipart/form-data; boundary=----b0undary';

describe('an audio upload, read without decoding it', () => {
  it('finds the model, the file and a WAV file’s length (48,000 bytes at 32,000 a second: 1.5 s)', () => {
    // The file holds the boundary's text without its leading line break: not a delimiter.
    const bytes = Buffer.concat([wav(48_000).subarray(0, 100), Buffer.from('------b0undary'), wav(48_000).subarray(114)]);
    const body = form('----b0undary', { model: 'whisper-1', response_format: 'verbose_json' }, { name: 'a.wav', bytes });
    const upload = readAudioUpload(body, TYPE, 'audio_transcription');
    expect(upload).toMatchObject({ model: 'whisper-1', seconds: 1.5, fileBytes: 48_044 });
    expect(upload.unmeteredBecause).toBeUndefined();
    expect(body.toString('utf8', upload.modelPart.start, upload.modelPart.end)).toBe('whisper-1');
    // A WAV's seconds are billed where the answer says nothing; its reservation is 1.5 s and ⌈1.5 × 1,000 / 60⌉ = 25 tokens.
    expect(uploadFacts(upload)).toMatchObject({ units: { audioSeconds: 1.5 }, reservation: { inputTokens: 25, outputTokens: 4096, units: { audioSeconds: 1.5 } } });
  });

  it('reserves a file of unknown length by its size at 16,000 bytes a second, and bills nothing from it', () => {
    const body = form('----b0undary', { model: 'whisper-1' }, { name: 'a.mp3', bytes: Buffer.alloc(32_000, 0xff) });
    const upload = readAudioUpload(body, TYPE, 'audio_transcription');
    expect(upload.seconds).toBeNull();
    expect(uploadFacts(upload)).toEqual({ reservation: expect.objectContaining({ inputTokens: 34, units: { audioSeconds: 2 } }) });
  });

  it('marks an answer without usage unmetered unless the file is a WAV', () => {
    const mp3 = form('----b0undary', { model: 'whisper-1', response_format: 'srt' }, { name: 'a.mp3', bytes: Buffer.alloc(10, 0xff) });
    expect(readAudioUpload(mp3, TYPE, 'audio_transcription').unmeteredBecause).toContain('response_format srt answers without usage');
    // A translation's json carries no usage either.
    const translation = form('----b0undary', { model: 'whisper-1' }, { name: 'a.mp3', bytes: Buffer.alloc(10, 0xff) });
    expect(readAudioUpload(translation, TYPE, 'audio_translation').unmeteredBecause).toContain('ask for verbose_json');
    const wavText = form('----b0undary', { model: 'whisper-1', response_format: 'text' }, { name: 'a.wav', bytes: wav(32_000) });
    expect(readAudioUpload(wavText, TYPE, 'audio_transcription').unmeteredBecause).toBeUndefined();
  });

  it('does not time a WAV by a byte rate its samples do not make: 30 s of 16 kHz 16-bit mono claiming 1,000,000,000 bytes a second', () => {
    // 960,000 bytes of samples are 30 s at 16,000 × 2 bytes a second, which is what a decoder plays; the forged
    // byte rate would bill them 0.00096 s. Not timed, a text answer cannot be metered.
    const forged = wav(960_000);
    forged.writeUInt32LE(1_000_000_000, 28);
    const body = form('----b0undary', { model: 'whisper-1', response_format: 'text' }, { name: 'a.wav', bytes: forged });
    const upload = readAudioUpload(body, TYPE, 'audio_transcription');
    expect(upload.seconds).toBeNull();
    expect(upload.unmeteredBecause).toContain('response_format text answers without usage');
    // A compressed format's average byte rate says nothing a decoder keeps to either (0x55: MPEG layer III in a WAV).
    const mp3InWav = wav(960_000);
    mp3InWav.writeUInt16LE(0x55, 20);
    expect(
      readAudioUpload(form('----b0undary', { model: 'whisper-1', response_format: 'text' }, { name: 'a.wav', bytes: mp3InWav }), TYPE, 'audio_transcription').seconds,
    ).toBeNull();
  });

  it('times every data chunk a decoder plays, not only the first: 2 bytes declared, then a second chunk of 30 s', () => {
    // A decoder that reaches the end of a data chunk looks for another one; the first declaring 2 bytes would have
    // billed 2 / 32,000 s. Both: (2 + 960,000) / 32,000 = 30.0000625 s.
    const first = wav(2);
    const second = Buffer.alloc(8);
    second.write('data', 0, 'latin1');
    second.writeUInt32LE(960_000, 4);
    const bytes = Buffer.concat([first, second, Buffer.alloc(960_000, 1)]);
    const body = form('----b0undary', { model: 'whisper-1', response_format: 'text' }, { name: 'a.wav', bytes });
    expect(readAudioUpload(body, TYPE, 'audio_transcription').seconds).toBe(30.0000625);
  });

  it('takes any stream value but false as a stream, which it cannot meter: a server may read 1 or True as true', () => {
    for (const stream of ['true', 'True', '1', 'on']) {
      const body = form('----b0undary', { model: 'whisper-1', stream }, { name: 'a.wav', bytes: wav(32_000) });
      expect(readAudioUpload(body, TYPE, 'audio_transcription')).toMatchObject({ unmeteredField: 'stream' });
    }
    const whole = form('----b0undary', { model: 'whisper-1', stream: 'false' }, { name: 'a.wav', bytes: wav(32_000) });
    expect(readAudioUpload(whole, TYPE, 'audio_transcription').unmeteredBecause).toBeUndefined();
  });

  it('refuses a model or response_format sent twice, naming it: the provider may read the other value', () => {
    const once = form('----b0undary', { model: 'whisper-1', response_format: 'text' }, { name: 'a.wav', bytes: wav(32_000) });
    const close = Buffer.from('------b0undary--\r\n');
    for (const [name, value] of [
      ['model', 'gpt-4o-transcribe'],
      ['response_format', 'srt'],
    ]) {
      const twice = Buffer.concat([
        once.subarray(0, once.length - close.length),
        Buffer.from(`------b0undary\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`),
        close,
      ]);
      const refused = (() => {
        try {
          readAudioUpload(twice, TYPE, 'audio_transcription');
        } catch (error) {
          return error as AudioRequestError;
        }
        return undefined;
      })();
      expect(refused).toBeInstanceOf(AudioRequestError);
      expect({ param: refused?.param, message: refused?.message }).toEqual({ param: name, message: `the form has more than one ${name} field: send it once` });
    }
  });

  it.each([
    ['no file part', form('----b0undary', { model: 'whisper-1' }), TYPE, 'file'],
    ['a file field without a filename', form('----b0undary', { model: 'whisper-1', file: 'abc' }), TYPE, 'file'],
    ['no model', form('----b0undary', {}, { name: 'a.wav', bytes: wav(10) }), TYPE, 'model'],
    ['a JSON body', Buffer.from('{"model":"whisper-1"}'), 'application/json', null],
    ['a body cut before its close delimiter', form('----b0undary', { model: 'whisper-1' }).subarray(0, 40), TYPE, null],
  ])('refuses %s, naming the field', (_what, body, contentType, param) => {
    const error = (() => {
      try {
        readAudioUpload(body, contentType, 'audio_transcription');
      } catch (caught) {
        return caught;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(AudioRequestError);
    expect((error as AudioRequestError).param).toBe(param);
  });

  it('reads the boundary from a quoted parameter and skips a preamble', () => {
    expect(formBoundary('multipart/form-data; charset=utf-8; boundary="a b"')).toBe('a b');
    expect(formBoundary('application/json')).toBeNull();
    const body = Buffer.concat([Buffer.from('preamble\r\n'), form('xyz', { model: 'm' })]);
    const parts = formParts(body, 'xyz');
    expect(parts.map((part) => [part.name, part.filename, body.toString('utf8', part.start, part.end)])).toEqual([['model', null, 'm']]);
  });
});

describe('a speech request', () => {
  it('counts characters as code points and estimates what a token-billed model uses', () => {
    const speech = readSpeechRequest({ model: 'gpt-4o-mini-tts', input: 'héllo 👋 world', voice: 'alloy' });
    expect(speech).toEqual({ model: 'gpt-4o-mini-tts', characters: 13, format: 'mp3' });
    // 13 characters: ⌈13 / 4⌉ = 4 input tokens; 13 / 15 s spoken × 1,250 / 60 = 18.06 → 19 audio tokens.
    expect(speechFacts(speech)).toMatchObject({
      units: { characters: 13 },
      reservation: { inputTokens: 4, outputTokens: 19, units: { characters: 13 } },
      speech: { characters: 13, format: 'mp3' },
    });
  });

  it('refuses an empty input and one over 4,096 characters', () => {
    expect(() => readSpeechRequest({ model: 'tts-1', input: '' })).toThrow(/Missing required parameter: 'input'/);
    expect(() => readSpeechRequest({ model: 'tts-1', input: 'ü'.repeat(4097) })).toThrow(/4097 characters long; the most taken is 4096/);
    expect(readSpeechRequest({ model: 'tts-1', input: 'ü'.repeat(4096) }).characters).toBe(4096);
  });
});
