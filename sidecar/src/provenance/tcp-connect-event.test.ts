// The tcp_connect reader against the event Tetragon published for the plain tcp_connect/sock policy
// (provenance.md §1.4), in the proto's field names (protojson's bare wrapper values written as {value}).

import { describe, expect, it } from 'vitest';
import { encodeEvent, TetragonEvent } from '../audit/tetragon-protocol.ts';
import { readTcpConnect } from './tcp-connect-event.ts';

const PUBLISHED = {
  process_kprobe: {
    process: {
      exec_id: 'YmVuYmVuOjcwMDA3NDAwMDAwMDAwOjgxNDUzMw==',
      pid: { value: 814533 },
      uid: { value: 1000 },
      cwd: '/home/alex',
      binary: '/usr/lib/firefox/firefox',
      flags: 'procFS',
      start_time: { seconds: 1789507486, nanos: 683339557 },
      auid: { value: 1000 },
      parent_exec_id: 'YmVuYmVuOjI1MTAwMDAwMDAwOjEwNjM=',
      refcnt: 3,
    },
    function_name: 'tcp_connect',
    args: [
      {
        sock_arg: {
          family: 'AF_INET',
          type: 'SOCK_STREAM',
          protocol: 'IPPROTO_TCP',
          saddr: '10.98.56.228',
          daddr: '151.101.65.155',
          sport: 37360,
          dport: 443,
          cookie: '18446614267298931072',
          state: 'TCP_SYN_SENT',
        },
      },
    ],
    action: 'KPROBE_ACTION_POST',
    policy_name: 'monitor-tcp-connections',
  },
  node_name: 'benben',
  // 2026-09-16T15:35:32.722282303Z
  time: { seconds: 1789572932, nanos: 722282303 },
};

describe('reading a tcp_connect event', () => {
  it('takes the connecting process and both ends of the connection from the published event', () => {
    expect(readTcpConnect(new TetragonEvent(encodeEvent(PUBLISHED)))).toEqual({
      atMs: Date.parse('2026-09-16T15:35:32.722Z'),
      podNamespace: '',
      podName: '',
      containerName: null,
      pid: 814533,
      execId: 'YmVuYmVuOjcwMDA3NDAwMDAwMDAwOjgxNDUzMw==',
      parentExecId: 'YmVuYmVuOjI1MTAwMDAwMDAwOjEwNjM=',
      binary: '/usr/lib/firefox/firefox',
      arguments: '',
      parents: [],
      saddr: '10.98.56.228',
      daddr: '151.101.65.155',
      sport: 37360,
      dport: 443,
    });
  });

  it('reads any other kprobe or event type as null', () => {
    const other = { ...PUBLISHED, process_kprobe: { ...PUBLISHED.process_kprobe, function_name: 'tcp_close' } };
    expect(readTcpConnect(new TetragonEvent(encodeEvent(other)))).toBeNull();
    const exec = { process_exec: { process: PUBLISHED.process_kprobe.process }, node_name: 'benben', time: PUBLISHED.time };
    expect(readTcpConnect(new TetragonEvent(encodeEvent(exec)))).toBeNull();
  });
});
