// The cluster ledger on a real redis-server (Debian's, appendfsync always): what the leader wrote is what a new
// leader reads, across a SIGKILL of the store; the ledger kept in ConfigMaps before the switch is read under
// the store's patches until the first compaction moves it in; a deposed leader's patch or compaction is a
// conflict that changes nothing.

import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RedisServer, startRedisServer } from '../../../test/support/redis-server.ts';
import { LedgerConflictError, LedgerLostError, type LoadedLedger } from './ledger-store.ts';
import { type LedgerPatch, LedgerState } from './ledger-state.ts';
import { RedisLedgerStore } from './redis-ledger-store.ts';

const POLICY = 'shop/checkout-monthly';
const NOV = '2026-11-01T00:00:00.000Z';

let server: RedisServer;
const clients: Redis[] = [];
beforeAll(async () => {
  server = await startRedisServer();
}, 120_000);
afterAll(async () => {
  for (const client of clients) client.disconnect();
  await server?.stop();
});

/** A patch of absolute values: `users` → spent (ledger units), each also its limit used; pod uid-a at report `seq`. */
function patch(users: Record<string, string>, seq: number): string {
  const doc: LedgerPatch = {
    v: 2,
    policies: {
      [POLICY]: {
        periods: { [NOV]: Object.fromEntries(Object.entries(users).map(([user, spent]) => [user, [spent, spent, 0]])) },
        applied: { 'uid-a': [seq, 'shop/checkout-a', 1_764_000_000_000] },
      },
    },
  };
  return JSON.stringify(doc);
}

function spent(loaded: LoadedLedger, user: string): bigint | undefined {
  return loaded.state.policies.get(POLICY)?.periods.get(Date.parse(NOV))?.get(user)?.spent;
}

/** A store on its own key prefix; `before` counts its reads of the ConfigMap ledger it replaces. */
function store(keyPrefix: string, before: LedgerState = new LedgerState()) {
  const client = new Redis(server.url, { maxRetriesPerRequest: 1 });
  clients.push(client);
  const reads = { before: 0 };
  const backend = new RedisLedgerStore(client, {
    keyPrefix,
    url: server.url,
    before: async () => {
      reads.before++;
      return { state: before, base: 0, next: 1, manifestVersion: undefined, patches: 0, patchBytes: 0, legacy: before.policies.size > 0 };
    },
  });
  return { backend, reads, client };
}

describe('the cluster ledger on Redis', () => {
  it('reads the ConfigMap ledger under its patches until the first compaction moves it in, then never again; a SIGKILL loses nothing answered', async () => {
    const configMaps = new LedgerState();
    configMaps.applyPatch(JSON.parse(patch({ alice: '70000000', bob: '5000000' }, 3)) as LedgerPatch);
    const { backend, reads } = store('t1', configMaps);

    const first = await backend.load();
    expect(first).toMatchObject({ base: 0, next: 1, manifestVersion: undefined, legacy: true });
    expect(spent(first, 'alice')).toBe(70_000_000n);

    // A patch before the first compaction, then the leader dies: the next leader reads both.
    await backend.writePatch(1, 0, patch({ alice: '80000000' }, 4));
    const again = await backend.load();
    expect(reads.before).toBe(2);
    expect(again).toMatchObject({ next: 2, patches: 1, legacy: true });
    expect([spent(again, 'alice'), spent(again, 'bob')]).toEqual([80_000_000n, 5_000_000n]);

    const parts = again.state.chunks(700 * 1024).map((p) => JSON.stringify(p));
    const version = await backend.compact(1, parts, { base: 0, manifestVersion: undefined });
    expect(version).toBe('1');
    await backend.writePatch(2, 1, patch({ carol: '1000000' }, 5));

    await server.kill();
    await server.start();
    const { backend: next, reads: nextReads } = store('t1', configMaps);
    const loaded = await next.load();
    expect(nextReads.before).toBe(0);
    expect(loaded).toMatchObject({ base: 1, next: 3, manifestVersion: '1', patches: 1, legacy: false });
    expect([spent(loaded, 'alice'), spent(loaded, 'bob'), spent(loaded, 'carol')]).toEqual([80_000_000n, 5_000_000n, 1_000_000n]);
    expect(loaded.state.policies.get(POLICY)!.applied.get('uid-a')).toMatchObject({ seq: 5, pod: 'shop/checkout-a' });
  });

  it("refuses a deposed leader's patch number and stale compaction, and keeps what was there", async () => {
    const { backend, client } = store('t2');
    await backend.writePatch(1, 0, patch({ alice: '10' }, 1));
    await expect(backend.writePatch(1, 0, patch({ alice: '99' }, 9))).rejects.toThrow(LedgerConflictError);

    const base = await backend.load();
    const parts = base.state.chunks(700 * 1024).map((p) => JSON.stringify(p));
    expect(await backend.compact(1, parts, { base: 0, manifestVersion: undefined })).toBe('1');
    // The patch the base folded in is gone from the log; writing it again is a conflict, not a second copy.
    expect(await client.hkeys('{t2:cluster}:log')).toEqual([]);
    await expect(backend.writePatch(1, 0, patch({ alice: '99' }, 9))).rejects.toThrow(/includes it/);
    // A leader that read the ledger before that compaction cannot replace its base.
    await expect(backend.compact(1, [patch({ alice: '99' }, 9)], { base: 0, manifestVersion: undefined })).rejects.toThrow(/changed by someone else/);

    const after = await backend.load();
    expect(after).toMatchObject({ base: 1, manifestVersion: '1', patches: 0 });
    expect(spent(after, 'alice')).toBe(10n);
  });

  it('says so when the store has lost what the leader wrote (emptied, a new pod on an empty disk, a replica that lags)', async () => {
    const { backend, client } = store('t3');
    await backend.writePatch(1, 0, patch({ alice: '10' }, 1));
    const parts = (await backend.load()).state.chunks(700 * 1024).map((p) => JSON.stringify(p));
    await backend.compact(1, parts, { base: 0, manifestVersion: undefined });
    // A replica that lags: the patch before the next one is missing.
    await backend.writePatch(2, 1, patch({ alice: '15' }, 2));
    await client.hdel('{t3:cluster}:log', '2');
    await expect(backend.writePatch(3, 1, patch({ alice: '16' }, 3))).rejects.toThrow(/holds neither patch 2 nor a base that includes it/);
    await client.flushall();
    await expect(backend.writePatch(2, 1, patch({ alice: '20' }, 2))).rejects.toThrow(LedgerLostError);
    // A compaction over the version the leader read, on a store that lost its manifest, is a loss, not a conflict.
    await expect(backend.compact(2, [patch({ alice: '20' }, 2)], { base: 1, manifestVersion: '1' })).rejects.toThrow(LedgerLostError);
    // Written again whole by the leader (no version to match on an empty store), it is read back.
    expect(await backend.compact(2, [patch({ alice: '20' }, 2)], { base: 0, manifestVersion: undefined })).toBe('1');
    expect(spent(await backend.load(), 'alice')).toBe(20n);
  });
});
