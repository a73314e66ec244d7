// protojson as Tetragon prints it: checked against hand-written expectations for each rule that differs
// from JSON.stringify of the decoded message.

import { describe, expect, it } from 'vitest';
import { timestampToRfc3339 } from './protojson.ts';
import { encodeEvent, TetragonEvent } from './tetragon-protocol.ts';

describe('protojson of Tetragon events', () => {
  it('prints timestamps in RFC 3339 with 0, 3, 6 or 9 fractional digits', () => {
    expect(timestampToRfc3339(1_700_000_000, 0)).toBe('2023-11-14T22:13:20Z');
    expect(timestampToRfc3339(1_700_000_000, 120_000_000)).toBe('2023-11-14T22:13:20.120Z');
    expect(timestampToRfc3339(1_700_000_000, 120_500_000)).toBe('2023-11-14T22:13:20.120500Z');
    expect(timestampToRfc3339(1_700_000_000, 5)).toBe('2023-11-14T22:13:20.000000005Z');
  });

  it('uses proto field names, bare wrapper values, enum names, int64 as strings, base64 bytes, and leaves zero values out', () => {
    const raw = encodeEvent({
      process_kprobe: {
        process: { exec_id: 'x', pid: { value: 7 }, uid: { value: 0 }, binary: '/bin/cat', refcnt: 0, pod: { namespace: 'a', name: 'b', pod_labels: { app: 'b' } } },
        function_name: 'security_file_open',
        args: [{ size_arg: '18446744073709551615' }, { bytes_arg: Buffer.from([0, 1, 2]) }, { int_arg: 0 }],
        action: 'KPROBE_ACTION_SIGKILL',
      },
      node_name: 'n1',
      time: { seconds: 1_700_000_000, nanos: 0 },
    });
    const json = JSON.parse(new TetragonEvent(raw).json()) as Record<string, unknown>;
    expect(json).toEqual({
      process_kprobe: {
        process: { exec_id: 'x', pid: 7, uid: 0, binary: '/bin/cat', pod: { namespace: 'a', name: 'b', pod_labels: { app: 'b' } } },
        function_name: 'security_file_open',
        args: [{ size_arg: '18446744073709551615' }, { bytes_arg: 'AAEC' }, { int_arg: 0 }],
        action: 'KPROBE_ACTION_SIGKILL',
      },
      node_name: 'n1',
      time: '2023-11-14T22:13:20Z',
    });
  });

  it('names an event type this proto does not know by its field number, and keeps its bytes', () => {
    // field 31, length-delimited, empty body; then node_name
    const raw = Buffer.concat([Buffer.from([0xfa, 0x01, 0x00]), encodeEvent({ node_name: 'n2' })]);
    const event = new TetragonEvent(raw);
    expect(event.info.type).toBe('event_31');
    expect(event.raw.equals(raw)).toBe(true);
    expect(JSON.parse(event.json())).toEqual({ node_name: 'n2' });
  });

  it('refuses bytes that are not a GetEventsResponse', () => {
    expect(() => new TetragonEvent(Buffer.from([0x0a, 0xff]))).toThrow();
  });
});
