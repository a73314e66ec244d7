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
    if (id === 'fmt ' && body + 16 <= head.length) byteRate = sampleBytesPerSecond(head, body);
    if (id === 'data') return byteRate === 0 ? null : { dataOffset: body, dataBytes: size === 0 || size === 0xffffffff ? null : size, byteRate };
    at = body + size + (size % 2); // chunks are padded to an even length
  }
  return null;
}

/** Sample formats whose byte rate is their sample rate times their block size: PCM, float, A-law, µ-law, extensible. */
const SAMPLE_FORMATS = new Set([0x0001, 0x0003, 0x0006, 0x0007, 0xfffe]);

/**
 * The byte rate of a format chunk at `at`, or 0 when it cannot be trusted. The header's own byte rate is a field
 * the writer fills in, and a decoder times the file by its sample rate and sample size instead: a caller who
 * wrote a huge byte rate over ordinary samples would be billed a fraction of a second for a long recording.
 * It is taken only when it is what the samples' rate and size make, for formats whose samples are fixed-size.
 */
function sampleBytesPerSecond(head: Buffer, at: number): number {
  const format = head.readUInt16LE(at);
  const channels = head.readUInt16LE(at + 2);
  const sampleRate = head.readUInt32LE(at + 4);
  const byteRate = head.readUInt32LE(at + 8);
  const blockAlign = head.readUInt16LE(at + 12);
  const bits = head.readUInt16LE(at + 14);
  if (!SAMPLE_FORMATS.has(format) || channels === 0 || bits === 0 || blockAlign !== channels * Math.ceil(bits / 8)) return 0;
  return byteRate === sampleRate * blockAlign ? byteRate : 0;
}

/**
 * Seconds of audio in a whole WAV file (no more than the bytes present), or null when it is not one. A decoder
 * that reaches the end of a data chunk looks for another and plays it too, so every data chunk is counted: a
 * first one declaring a few bytes cannot hide the rest of the recording from the bill.
 */
export function wavSeconds(file: Buffer): number | null {
  const layout = wavLayout(file);
  if (layout === null) return null;
  const present = file.length - layout.dataOffset;
  if (layout.dataBytes === null || layout.dataBytes >= present) return present / layout.byteRate;
  let bytes = layout.dataBytes;
  // Each chunk header moves the walk on by at least 8 bytes: a file of 25 MiB has at most ~3 million of them.
  for (let at = layout.dataOffset + layout.dataBytes + (layout.dataBytes % 2); at + 8 <= file.length;) {
    const size = file.readUInt32LE(at + 4);
    if (file.toString('latin1', at, at + 4) === 'data') bytes += Math.min(size, file.length - at - 8);
    at += 8 + size + (size % 2);
  }
  return bytes / layout.byteRate;
}
