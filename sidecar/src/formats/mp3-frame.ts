// The bit rate of an MP3 stream, from the header of its first MPEG audio frame (after an ID3v2 tag, if any).
// A constant-bit-rate stream's length is then its bytes over that rate; used to time an MP3 speech answer
// (ADR 0911), whose encoder writes one rate throughout. Layer III only, the layer MP3 is.

/** Kbit/s by bit-rate index: MPEG-1 Layer III, and MPEG-2 and 2.5 Layer III (0: free format, 15: invalid). */
const MPEG1_KBPS = [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 0];
const MPEG2_KBPS = [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160, 0];

/** Where the first frame starts and its bit rate in bytes a second; null when the head holds no Layer III frame header. */
export function mp3Stream(head: Buffer): { offset: number; bytesPerSecond: number } | null {
  let at = 0;
  // ID3v2: "ID3", version, flags, then the tag's size in four 7-bit bytes, not counting its 10-byte header.
  if (head.length >= 10 && head.toString('latin1', 0, 3) === 'ID3') {
    at = 10 + (((head[6]! & 0x7f) << 21) | ((head[7]! & 0x7f) << 14) | ((head[8]! & 0x7f) << 7) | (head[9]! & 0x7f));
  }
  if (at + 4 > head.length || head[at] !== 0xff || (head[at + 1]! & 0xe0) !== 0xe0) return null;
  const version = (head[at + 1]! >> 3) & 0x03; // 3: MPEG-1, 2: MPEG-2, 0: MPEG-2.5, 1: reserved
  const layer = (head[at + 1]! >> 1) & 0x03; // 1: Layer III
  if (version === 1 || layer !== 1) return null;
  const kbps = (version === 3 ? MPEG1_KBPS : MPEG2_KBPS)[head[at + 2]! >> 4]!;
  return kbps === 0 ? null : { offset: at, bytesPerSecond: (kbps * 1000) / 8 };
}
