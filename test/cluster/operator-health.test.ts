// The operator's kubelet probes (operator/src/health, ADR 0720) on real operator processes: every replica,
// standby included, answers /healthz and /readyz on its health port; readiness means "caches synced", not "serving
// the push port"; an API server that refuses the operator makes it unready but not dead.

import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startControlPlane, type ControlPlane } from '../control-plane/control-plane.ts';
import { freePort } from '../control-plane/free-port.ts';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { eventually, installOperatorPrerequisites, KubeApi, leaseHolder, type OperatorProcess, startOperatorProcess, tempDir } from './operator-fixtures.ts';

async function probe(port: number, path: string): Promise<{ status: number; body: string }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: res.status, body: await res.text() };
}

async function refusesConnections(port: number): Promise<boolean> {
  return fetch(`http://127.0.0.1:${port}/`).then(
    () => false,
    (error: Error & { cause?: { code?: string } }) => error.cause?.code === 'ECONNREFUSED',
  );
}

describe('operator health listener on a real API server', () => {
  let cp: ControlPlane;
  let api: KubeApi;
  let dir: ReturnType<typeof tempDir>;
  let kubeconfig: string;
  const started: OperatorProcess[] = [];

  const operator = async (identity: string, opts: { kubeconfig?: string; healthPort?: number } = {}) => {
    const healthPort = opts.healthPort ?? (await freePort());
    const grpcPort = await freePort();
    const proc = startOperatorProcess({
      kubeconfig: opts.kubeconfig ?? kubeconfig,
      identity,
      grpcPort,
      logDir: dir.path,
      extraArgs: [`--health-port=${healthPort}`],
    });
    started.push(proc);
    return { proc, healthPort, grpcPort };
  };

  /**
   * An operator that came up ready. A port freePort found free can be taken by another suite's process (kind,
   * Docker) before the operator binds it; an operator that exits for that is started again on new ports, and one
   * that exits for any other reason fails the test with its log.
   */
  const readyOperator = async (identity: string) => {
    for (let attempt = 1; ; attempt += 1) {
      const launched = await operator(identity);
      await eventually(
        `${identity} ready on ${launched.healthPort}, or exited`,
        async () => {
          if (launched.proc.hasExited()) return true;
          return (await probe(launched.healthPort, '/readyz').catch(() => ({ status: 0 }))).status === 200;
        },
        60_000,
      );
      if (!launched.proc.hasExited()) return launched;
      const log = launched.proc.logTail(40);
      if (attempt === 3 || !/EADDRINUSE|cannot open the health port/.test(log)) throw new Error(`operator ${identity} exited before it was ready:\n${log}`);
    }
  };

  beforeAll(async () => {
    dir = tempDir('tollgate-operator-health-');
    cp = await startControlPlane();
    api = new KubeApi(cp.kubeConfig);
    kubeconfig = await installOperatorPrerequisites(cp, dir.path);
  });

  afterAll(async () => {
    await Promise.all(started.map((p) => p.stop(2_000)));
    await cp?.stop();
    dir?.remove();
  });

  it('leader and standby are both live and ready; the standby without opening the push port', async () => {
    const leader = await readyOperator('health-a');
    await eventually('health-a to lead', async () => (await leaseHolder(api)) === 'health-a', 60_000);
    const standby = await readyOperator('health-b');
    for (const { healthPort } of [leader, standby]) {
      expect(await probe(healthPort, '/readyz')).toMatchObject({ status: 200 });
      expect(await probe(healthPort, '/healthz')).toEqual({ status: 200, body: 'ok\n' });
    }
    expect(await leaseHolder(api)).toBe('health-a');
    expect(await refusesConnections(standby.grpcPort)).toBe(true);
    expect(await refusesConnections(leader.grpcPort)).toBe(false);
  });

  it('stays live but not ready while the API server refuses to list (no RBAC)', async () => {
    const kc = await cp.userKubeConfig('nobody');
    const path = join(dir.path, 'nobody.kubeconfig');
    writeFileSync(path, kc.exportConfig(), { mode: 0o600 });
    const { proc, healthPort } = await operator('health-nobody', { kubeconfig: path });
    await eventually('the operator to be refused', () => proc.logTail(200).includes('informer error; restarting after backoff'), 60_000);
    const ready = await eventually('the health port', () => probe(healthPort, '/readyz').catch(() => undefined));
    expect(ready.status).toBe(503);
    expect(ready.body).toContain('informer proxyconfigs: cache not synced yet');
    expect(ready.body).toContain('informer secrets: cache not synced yet');
    expect((await probe(healthPort, '/healthz')).status).toBe(200);
  });

  it('exits with an error when its health port is taken', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as { port: number }).port;
    try {
      const { proc } = await operator('health-clash', { healthPort: port });
      expect(await proc.exited).toMatch(/code 1/);
      expect(proc.logTail(50)).toContain('cannot open the health port');
    } finally {
      taken.close();
    }
  });
});
