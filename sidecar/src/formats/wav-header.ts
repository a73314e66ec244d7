// How long a WAV recording is, from its RIFF header: the data chunk's size over the format chunk's bytes per
// second. Used to meter an upload whose answer reports no duration and to price one before it goes out, and to
// time a WAV speech answer (ADR 0911); other audio formats need their frames decoded to know their length,
// which the proxy does not do.

/** Where a WAV file's samples start, how many bytes of them it declares, and how many make a second. */
interface WavLayout {
  dataOffset: number;
  /** The data chunk's declared size; null when the writer did not know it (0 or 0xFFFFFFFF: a streamed file). */
  dataBytes: number | null;
  byteRate: number;
}

/** The layout of a WAV file from its first bytes, or null when they are not a WAV header it can read. */
export function wavLayout(head: Buffer): WavLayout | null {
  if (head.length < 12 || head.toString('latin1', 0, 4) !== 'RIFF' || head.toString('latin1', 8, 12) !== 'WAVE') return null;
  let byteRate = 0;
  let at = 12;
  while (at + 8 <= head.length) {
    const id = head.toString('latin1', at, at + 4);
    const size = head.readUInt32LE(at + 4);
    const body = at + 8;
    if (id === 'fmt ' && body + 12 <= head.length) byteRate = head.readUInt32LE(body + 8);
    if (id === 'data') return byteRate === 0 ? null : { dataOffset: body, dataBytes: size === 0 || size === 0xffffffff ? null : size, byteRate };
    at = body + size + (size % 2); // chunks are padded to an even length
  }
  return null;
}

/** Seconds of audio in a whole WAV file (no more than the bytes present), or null when it is not one. */
export function wavSeconds(file: Buffer): number | null {
  const layout = wavLayout(file);
  if (layout === null) return null;
  const present = file.length - layout.dataOffset;
  return Math.min(layout.dataBytes ?? present, present) / layout.byteRate;
}
