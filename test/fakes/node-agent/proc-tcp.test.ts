// The node agent's /proc readers against this machine's real sockets and processes: a connection this process
// opens is found in its namespace's table with the ports the kernel chose, its accepted twin is on a listening
// port, and this process is named as the socket's holder, with its binary and arguments.

import { createServer, connect, type AddressInfo, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../support/wait-for.ts';
import { cgroupContainerId, readProcess, tetragonArguments } from './proc-process.ts';
import { namespaceSockets, parseTcpTable, procAddress, socketHolders } from './proc-tcp.ts';

describe('proc-tcp', () => {
  let server: Server;
  let client: Socket;
  let port = 0;

  beforeAll(async () => {
    server = createServer(() => undefined);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
    client = connect(port, '127.0.0.1');
    await new Promise<void>((resolve) => client.once('connect', resolve));
  });
  afterAll(async () => {
    client.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  it('reads addresses as the kernel prints them: little-endian words, ports in hex', () => {
    expect(procAddress('0100007F')).toBe('127.0.0.1');
    expect(procAddress('0A01A8C0')).toBe('192.168.1.10');
    expect(procAddress('00000000000000000000000001000000')).toBe('::1');
    expect(procAddress('0000000000000000FFFF00000100007F')).toBe('::ffff:127.0.0.1');
    expect(procAddress('B80D0120000000000000000001000000')).toBe('2001:db8::1');
    const table =
      '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:1F95 0100007F:A4B2 01 00000000:00000000 00:00000000 00000000 65532        0 912345 1 0 20 4 30 10 -1\n';
    expect(parseTcpTable(table, 'AF_INET')).toEqual([
      { family: 'AF_INET', localAddress: '127.0.0.1', localPort: 8085, remoteAddress: '127.0.0.1', remotePort: 42162, state: 1, inode: 912345 },
    ]);
  });

  it('finds this process’s connection, its accepted twin on a listening port, and this process as its holder', async () => {
    const { owned, listening } = await waitFor('both ends in the table', async () => {
      const sockets = await namespaceSockets(process.pid);
      return [...sockets.owned.values()].some((s) => s.localPort === client.localPort) ? sockets : undefined;
    });
    const mine = [...owned.values()].find((s) => s.localPort === client.localPort && s.remotePort === port)!;
    expect(mine).toMatchObject({ family: 'AF_INET', localAddress: '127.0.0.1', remoteAddress: '127.0.0.1', state: 1 });
    const accepted = [...owned.values()].find((s) => s.localPort === port && s.remotePort === client.localPort);
    expect(accepted).toBeDefined();
    expect(listening.has(port)).toBe(true);
    expect(listening.has(client.localPort!)).toBe(false);
    const holders = await socketHolders([process.pid], new Set([mine.inode]));
    expect(holders.get(mine.inode)).toBe(process.pid);
  });

  it('describes a process as Tetragon does: binary, argv[1:] with spaced arguments quoted, parent, start time', async () => {
    const me = (await readProcess(process.pid))!;
    expect(me.binary).toBe(process.execPath);
    expect(me.ppid).toBe(process.ppid);
    // argv[0] is left out: it is the binary's business.
    expect(me.arguments.startsWith(process.argv0)).toBe(false);
    expect(me.arguments).toContain(process.argv[1]!);
    const startedMs = Number(me.startNs / 1_000_000n);
    expect(startedMs).toBeLessThanOrEqual(Date.now());
    expect(startedMs).toBeGreaterThan(Date.now() - process.uptime() * 1000 - 2_000);
    expect(tetragonArguments(['/usr/bin/python3', 'agent.py', '--say', 'hello there'])).toBe('agent.py --say "hello there"');
    expect(await readProcess(2 ** 22 + 1)).toBeNull();
  });

  it('takes the container id from a cgroup path, v1 cgroupfs or v2 systemd', () => {
    const id = 'a'.repeat(12) + '0123456789abcdef'.repeat(3) + 'b'.repeat(4);
    expect(cgroupContainerId(`12:memory:/kubepods/besteffort/pod1f2e/${id}\n1:name=systemd:/kubepods/besteffort/pod1f2e/${id}\n`)).toBe(id);
    expect(cgroupContainerId(`0::/kubepods.slice/kubepods-pod1f2e.slice/cri-containerd-${id}.scope\n`)).toBe(id);
    expect(cgroupContainerId('0::/user.slice/user-0.slice/session-1.scope\n')).toBeNull();
  });
});
