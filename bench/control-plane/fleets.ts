// The benchmark's side of its load generators: a few child processes (bench/control-plane-fleet.ts), each
// holding up to `perProcess` simulated sidecars, addressed as one fleet numbered 0..N-1.

import { fork, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import type { FleetRequest, FleetSummary } from '../control-plane-fleet.ts';
import type { FleetOptions, FleetPod, SpendLoad } from '../../test/cluster/sidecar-fleet.ts';

class FleetProcess {
  readonly child: ChildProcess;
  size = 0;
  #next = 1;
  #waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();

  constructor(options: FleetOptions) {
    this.child = fork(join(import.meta.dirname, '..', 'control-plane-fleet.ts'), [JSON.stringify(options)], {
      serialization: 'advanced',
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      // Room for a few thousand TLS connections' buffers.
      execArgv: ['--max-old-space-size=2048'],
    });
    this.child.on('message', (m: { id: number; result?: unknown; error?: string }) => {
      const waiter = this.#waiting.get(m.id);
      this.#waiting.delete(m.id);
      if (m.error !== undefined) waiter?.reject(new Error(m.error));
      else waiter?.resolve(m.result);
    });
    this.child.on('exit', (code) => {
      for (const w of this.#waiting.values()) w.reject(new Error(`fleet process exited with ${code}`));
      this.#waiting.clear();
    });
  }

  ask<T>(request: FleetRequest): Promise<T> {
    const id = this.#next++;
    return new Promise<T>((resolve, reject) => {
      this.#waiting.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.child.send({ id, ...request });
    });
  }
}

export class Fleets {
  readonly #options: FleetOptions;
  readonly #perProcess: number;
  readonly #processes: FleetProcess[] = [];

  constructor(options: FleetOptions, perProcess: number) {
    this.#options = options;
    this.#perProcess = perProcess;
  }

  get size(): number {
    return this.#processes.reduce((n, p) => n + p.size, 0);
  }

  get pids(): number[] {
    return this.#processes.map((p) => p.child.pid!);
  }

  /** Adds simulated sidecars for these pods, filling the last process before starting another. */
  async add(pods: FleetPod[]): Promise<void> {
    let rest = pods;
    while (rest.length > 0) {
      let target = this.#processes.at(-1);
      if (!target || target.size >= this.#perProcess) {
        target = new FleetProcess(this.#options);
        this.#processes.push(target);
      }
      const take = rest.slice(0, this.#perProcess - target.size);
      rest = rest.slice(take.length);
      await target.ask({ op: 'add', pods: take });
      target.size += take.length;
    }
  }

  async summary(): Promise<FleetSummary> {
    const all = await Promise.all(this.#processes.map((p) => p.ask<FleetSummary>({ op: 'summary' })));
    const failures: Record<string, number> = {};
    for (const s of all) for (const [k, v] of Object.entries(s.failures)) failures[k] = (failures[k] ?? 0) + v;
    return {
      sidecars: all.reduce((n, s) => n + s.sidecars, 0),
      connected: all.reduce((n, s) => n + s.connected, 0),
      streams: all.reduce((n, s) => n + s.streams, 0),
      failures,
      budgetMessages: all.reduce((n, s) => n + s.budgetMessages, 0),
      usageEntries: all.reduce((n, s) => n + s.usageEntries, 0),
      reportsSent: all.reduce((n, s) => n + s.reportsSent, 0),
      charged: all.reduce((n, s) => n + s.charged, 0n),
      acknowledged: all.reduce((n, s) => n + s.acknowledged, 0n),
      rssMb: all.reduce((n, s) => n + s.rssMb, 0),
    };
  }

  /** When each sidecar acknowledged `version` (undefined: not yet), in fleet order. */
  async acks(version: string): Promise<(number | undefined)[]> {
    return (await Promise.all(this.#processes.map((p) => p.ask<(number | undefined)[]>({ op: 'acks', version })))).flat();
  }

  /** When each sidecar's current stream delivered its first snapshot (0: not connected), in fleet order. */
  async delivered(): Promise<number[]> {
    return (await Promise.all(this.#processes.map((p) => p.ask<number[]>({ op: 'delivered' })))).flat();
  }

  async startSpend(load: Omit<SpendLoad, 'firstIndex' | 'fleetSize'>, periodStart: string): Promise<void> {
    let first = 0;
    for (const p of this.#processes) {
      await p.ask({ op: 'startSpend', load: { ...load, firstIndex: first, fleetSize: this.size }, periodStart });
      first += p.size;
    }
  }

  async stopSpend(): Promise<void> {
    await Promise.all(this.#processes.map((p) => p.ask({ op: 'stopSpend' })));
  }

  /** Charges a probe user through sidecar `index` of the fleet; every sidecar expects to see it. */
  async probe(index: number, charge: { policy: string; user: string; periodStart: string; units: bigint }): Promise<void> {
    await Promise.all(this.#processes.map((p) => p.ask({ op: 'expectProbe', user: charge.user, units: charge.units })));
    let first = 0;
    for (const p of this.#processes) {
      if (index < first + p.size) return p.ask({ op: 'probe', index: index - first, charge });
      first += p.size;
    }
    throw new Error(`no sidecar ${index} in a fleet of ${this.size}`);
  }

  /** When the probe's report went out, and when each sidecar saw the probe user's usage (fleet order). */
  async probeSeen(user: string): Promise<{ sentAt: number | undefined; seen: (number | undefined)[] }> {
    const all = await Promise.all(this.#processes.map((p) => p.ask<{ sentAt?: number; seen: (number | undefined)[] }>({ op: 'probeSeen', user })));
    return { sentAt: all.find((a) => a.sentAt !== undefined)?.sentAt, seen: all.flatMap((a) => a.seen) };
  }

  async stop(): Promise<void> {
    await Promise.all(
      this.#processes.map(async (p) => {
        const exited = new Promise((resolve) => p.child.once('exit', resolve));
        await p.ask({ op: 'stop' }).catch(() => undefined);
        await exited;
      }),
    );
  }
}
