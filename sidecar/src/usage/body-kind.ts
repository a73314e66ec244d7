// Which decoder reads a response body, from its Content-Type.

export type BodyKind = 'json' | 'sse' | 'aws-eventstream' | 'audio' | 'unknown';

export function bodyKindOf(contentType: string | undefined): BodyKind {
  if (contentType === undefined) return 'unknown';
  const semicolon = contentType.indexOf(';');
  const mediaType = (semicolon === -1 ? contentType : contentType.slice(0, semicolon)).trim().toLowerCase();
  if (mediaType === '') return 'unknown';
  if (mediaType === 'text/event-stream') return 'sse';
  if (mediaType === 'application/vnd.amazon.eventstream') return 'aws-eventstream';
  // Speech: bytes no usage is read from (the request says what it cost, ADR 0911).
  if (mediaType.startsWith('audio/')) return 'audio';
  // application/json, application/x-ndjson, text/plain from lax servers…: all read as a JSON body, which
  // costs nothing when it is not JSON (no usage is found).
  return 'json';
}

/** For a body without Content-Type: guess from its first significant byte. */
export function sniffBodyKind(firstByte: number): Exclude<BodyKind, 'audio'> {
  if (firstByte === 0x7b || firstByte === 0x5b) return 'json'; // { [
  if (firstByte === 0x00) return 'aws-eventstream'; // a frame's length prefix (frames are far below 16 MiB)
  return 'sse';
}
