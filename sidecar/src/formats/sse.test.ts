import { describe, expect, it } from 'vitest';
import { SseDecoder } from './sse.ts';

interface Seen {
  type: string;
  data: string;
  start: number;
  end: number;
}

function decode(chunks: Buffer[], options: ConstructorParameters<typeof SseDecoder>[1] = {}): { events: Seen[]; cut: boolean; decoder: SseDecoder } {
  const events: Seen[] = [];
  const decoder = new SseDecoder((type, data) => events.push({ type, data, start: decoder.eventStart, end: decoder.boundary }), options);
  for (const chunk of chunks) decoder.push(chunk);
  const cut = decoder.end();
  return { events, cut, decoder };
}

function splitAt(bytes: Buffer, ...points: number[]): Buffer[] {
  const out: Buffer[] = [];
  let from = 0;
  for (const point of points) {
    out.push(bytes.subarray(from, point));
    from = point;
  }
  out.push(bytes.subarray(from));
  return out;
}

// An Anthropic-style stream with event names, a comment, a multi-line data field and non-ASCII text.
const STREAM = Buffer.from(
  [
    ': keep-alive comment',
    '',
    'event: message_start',
    'data: {"type":"message_start"}',
    '',
    'event: content_block_delta',
    'data: {"type":"content_block_delta","delta":{"text":"Grüße, 世界 🚀"}}',
    '',
    'data: line one',
    'data:line two',
    'data',
    '',
    'id: 7',
    'retry: 1000',
    '',
    'data: [DONE]',
    '',
    '',
  ].join('\n'),
);

const EXPECTED = [
  { type: 'message_start', data: '{"type":"message_start"}' },
  { type: 'content_block_delta', data: '{"type":"content_block_delta","delta":{"text":"Grüße, 世界 🚀"}}' },
  { type: '', data: 'line one\nline two\n' },
  { type: '', data: '[DONE]' },
];

describe('SseDecoder', () => {
  it('decodes events, joins multi-line data, ignores comments and events without data', () => {
    const { events, cut } = decode([STREAM]);
    expect(events.map(({ type, data }) => ({ type, data }))).toEqual(EXPECTED);
    expect(cut).toBe(false);
  });

  it('gives the same events whatever the chunking, including a split inside a multi-byte character', () => {
    for (let i = 0; i <= STREAM.length; i++) {
      const { events } = decode(splitAt(STREAM, i));
      expect(
        events.map(({ type, data }) => ({ type, data })),
        `split at ${i}`,
      ).toEqual(EXPECTED);
    }
    const bytewise = decode([...STREAM].map((byte) => Buffer.from([byte])));
    expect(bytewise.events.map(({ type, data }) => ({ type, data }))).toEqual(EXPECTED);
  });

  it('accepts CRLF and bare CR line endings, also when a CRLF is split across chunks', () => {
    for (const eol of ['\r\n', '\r']) {
      const bytes = Buffer.from(STREAM.toString('utf8').replaceAll('\n', eol));
      for (let i = 0; i <= bytes.length; i++) {
        const { events, cut } = decode(splitAt(bytes, i));
        expect(
          events.map(({ type, data }) => ({ type, data })),
          `${JSON.stringify(eol)} split at ${i}`,
        ).toEqual(EXPECTED);
        expect(cut).toBe(false);
      }
    }
  });

  it('reports each event byte range, terminators included, so whole events can be cut out', () => {
    const bytes = Buffer.from('data: a\r\n\r\n: c\ndata: b\n\ndata: c\n\n');
    for (let i = 0; i <= bytes.length; i++) {
      const { events } = decode(splitAt(bytes, i));
      expect(
        events.map((e) => bytes.subarray(e.start, e.end).toString()),
        `split at ${i}`,
      ).toEqual(['data: a\r\n\r\n', ': c\ndata: b\n\n', 'data: c\n\n']);
    }
  });

  it('reports a stream that stops inside an event and does not dispatch it', () => {
    const { events, cut, decoder } = decode([Buffer.from('data: {"a":1}\n\ndata: {"b":')]);
    expect(events.map((e) => e.data)).toEqual(['{"a":1}']);
    expect(cut).toBe(true);
    expect(decoder.pendingBytes).toBe('data: {"b":'.length);
  });

  it('skips an event larger than the limit, counts it, and decodes the next one', () => {
    const big = `data: ${'x'.repeat(5000)}\n\n`;
    const bytes = Buffer.from(`data: small\n\n${big}data: after\n\n`);
    for (const points of [[], [20], [20, 40, 3000, 5010]]) {
      const { events, decoder } = decode(splitAt(bytes, ...points), { maxEventBytes: 1024 });
      expect(events.map((e) => e.data)).toEqual(['small', 'after']);
      expect(decoder.oversizedEvents).toBe(1);
    }
  });

  it('does not decode data of event types the caller skips, but still reports the event', () => {
    const bytes = Buffer.from('event: ping\ndata: {"type":"ping"}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n');
    const { events } = decode([bytes], { skipDataOf: (type) => type === 'ping' });
    expect(events.map(({ type, data }) => ({ type, data }))).toEqual([
      { type: 'ping', data: '' },
      { type: 'message_stop', data: '{"type":"message_stop"}' },
    ]);
  });
});
