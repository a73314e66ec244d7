// The cluster ledger on a Redis-compatible store (budgets.store redis, ADR 1314): the same log of patches on a
// compacted base as the ConfigMaps (ledger-store.ts, ADR 1307), so the leader's memory, acknowledgements and
// conflicts work unchanged, but nothing of it reaches the API server or etcd. Keys, one hash tag (one slot):
//
//   {<prefix>:cluster}:manifest  hash: base (the last patch the base includes), parts, version
//   {<prefix>:cluster}:base      hash: part index → JSON of a LedgerPatch
//   {<prefix>:cluster}:log       hash: patch number → JSON of a LedgerPatch, only those after the base
//
// A patch is written by a script that refuses a number that exists or that the base already includes (a deposed
// leader still writing); a compaction by one that checks the manifest's version, replaces the base, drops the
// patches it folds in and bumps the version, all at once, so no half-done compaction is ever read. The store
// runs with appendfsync always (the chart's and the tests' setting): what it answered is on its disk. A store
// that no longer holds what the leader wrote (a deleted pod's emptyDir, a failover to a lagging replica) is a
// LedgerLostError at the next patch (it lacks the patch before) or compaction (it lacks the manifest), and the
// leader writes the whole ledger from its memory again. A store without a base gets one at the first write.
//
// While the store holds no manifest, the ConfigMap ledger (what this operator kept before the switch to Redis)
// is read as the base under whatever the store's log holds; the first compaction writes it into the store and
// from then on the ConfigMaps are not read again, nor changed, so a switch back finds the spend as it was.

import type { Redis } from 'ioredis';
import { storeError } from '../../../contracts/redis-connection.ts';
import { type LedgerBackend, LedgerConflictError, LedgerLostError, type LoadedLedger } from './ledger-store.ts';
import { type LedgerPatch, LedgerState } from './ledger-state.ts';

// ARGV: the patch's number and its JSON. Patch numbers are consecutive (a compaction's base is a patch's
// number), so a patch goes on top of its predecessor or of the base that folded it in; anything else means the
// store lost what the leader wrote (emptied, a new pod on an empty disk, a failover to a replica that lags): -1.
const WRITE_PATCH = `
local base = tonumber(redis.call('HGET', KEYS[1], 'base') or '0')
local seq = tonumber(ARGV[1])
if seq <= base then return 0 end
if seq - 1 ~= base and redis.call('HEXISTS', KEYS[2], tostring(seq - 1)) == 0 then return -1 end
return redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2])
`;

// ARGV: the manifest version the leader read ('' for none), the new base's patch number, then its parts.
const COMPACT = `
local version = redis.call('HGET', KEYS[1], 'version') or ''
if version == '' and ARGV[1] ~= '' then return -1 end
if version ~= ARGV[1] then return false end
local gen = tonumber(ARGV[2])
redis.call('DEL', KEYS[2])
for i = 3, #ARGV do redis.call('HSET', KEYS[2], tostring(i - 3), ARGV[i]) end
for _, seq in ipairs(redis.call('HKEYS', KEYS[3])) do
  if tonumber(seq) <= gen then redis.call('HDEL', KEYS[3], seq) end
end
local next = tostring((tonumber(version) or 0) + 1)
redis.call('HSET', KEYS[1], 'base', ARGV[2], 'parts', tostring(#ARGV - 2), 'version', next)
return next
`;

interface LedgerCommands {
  tollgateLedgerPatch(manifest: string, log: string, seq: string, json: string): Promise<number>;
  tollgateLedgerCompact(manifest: string, base: string, log: string, version: string, gen: string, ...parts: string[]): Promise<string | number | null>;
}

export class RedisLedgerStore implements LedgerBackend {
  readonly where: string;
  readonly #redis: Redis & LedgerCommands;
  readonly #keys: { manifest: string; base: string; log: string };
  readonly #before: () => Promise<LoadedLedger>;
  readonly #url: string;

  /** `before`: the ledger kept before the switch to this store (the ConfigMaps'), read while this one has no base. */
  constructor(redis: Redis, opts: { keyPrefix: string; url: string; before: () => Promise<LoadedLedger> }) {
    redis.defineCommand('tollgateLedgerPatch', { numberOfKeys: 2, lua: WRITE_PATCH });
    redis.defineCommand('tollgateLedgerCompact', { numberOfKeys: 3, lua: COMPACT });
    this.#redis = redis as Redis & LedgerCommands;
    const tag = `{${opts.keyPrefix}:cluster}`;
    this.#keys = { manifest: `${tag}:manifest`, base: `${tag}:base`, log: `${tag}:log` };
    this.#url = opts.url;
    this.where = `Redis at ${new URL(opts.url).host}`;
    this.#before = opts.before;
  }

  async load(): Promise<LoadedLedger> {
    return this.#named(this.#load());
  }

  /** A failed command says which store and why (ioredis alone says only that its retries ran out). */
  async #named<T>(command: Promise<T>): Promise<T> {
    try {
      return await command;
    } catch (error) {
      throw error instanceof LedgerConflictError || error instanceof LedgerLostError ? error : storeError(this.#redis, this.#url, error);
    }
  }

  async #load(): Promise<LoadedLedger> {
    // One transaction: a compaction between the reads would otherwise pair a base with patches it folded in.
    const replies = await this.#redis.multi().hgetall(this.#keys.manifest).hgetall(this.#keys.base).hgetall(this.#keys.log).exec();
    if (!replies) throw new Error('the budget ledger read in Redis was aborted');
    const [manifest, parts, log] = replies.map(([error, value]) => {
      if (error) throw error;
      return value as Record<string, string>;
    }) as [Record<string, string>, Record<string, string>, Record<string, string>];
    const base = Number(manifest.base ?? 0);
    const patches = Object.entries(log)
      .map(([seq, json]) => ({ seq: Number(seq), json }))
      .filter((p) => p.seq > base)
      .sort((a, b) => a.seq - b.seq);
    let state: LedgerState;
    // A store without a base gets one at the first write (`legacy` asks for the compaction): until then a lost
    // store could not be told from a fresh one, and patches of absolute values alone would lose the users they
    // do not name.
    const legacy = manifest.version === undefined;
    if (manifest.version === undefined) {
      state = (await this.#before()).state;
    } else {
      state = new LedgerState();
      const count = Number(manifest.parts);
      for (let i = 0; i < count; i++) {
        const part = parts[String(i)];
        if (part === undefined) throw new Error(`the budget ledger's base ${base} in Redis lacks part ${i} of ${count}; it cannot be read`);
        state.applyPatch(JSON.parse(part) as LedgerPatch);
      }
    }
    for (const { json } of patches) state.applyPatch(JSON.parse(json) as LedgerPatch);
    return {
      state,
      base,
      next: Math.max(base, patches.at(-1)?.seq ?? 0) + 1,
      manifestVersion: manifest.version,
      patches: patches.length,
      patchBytes: patches.reduce((n, p) => n + p.json.length, 0),
      legacy,
    };
  }

  async writePatch(seq: number, base: number, json: string): Promise<void> {
    const written = await this.#named(this.#redis.tollgateLedgerPatch(this.#keys.manifest, this.#keys.log, String(seq), json));
    if (written === -1) {
      throw new LedgerLostError(
        `the Redis store at ${new URL(this.#url).host} holds neither patch ${seq - 1} nor a base that includes it (leader's base ${base}): emptied, replaced or rolled back`,
      );
    }
    if (written !== 1) throw new LedgerConflictError(`budget ledger patch ${seq} exists already in Redis, or its base includes it: another operator replica wrote it`);
  }

  async compact(gen: number, parts: string[], previous: { base: number; manifestVersion: string | undefined }): Promise<string> {
    const { manifest, base, log } = this.#keys;
    const version = await this.#named(this.#redis.tollgateLedgerCompact(manifest, base, log, previous.manifestVersion ?? '', String(gen), ...parts));
    if (version === -1)
      throw new LedgerLostError(`the Redis store at ${new URL(this.#url).host} no longer holds the budget ledger's manifest (version ${previous.manifestVersion})`);
    if (version === null) throw new LedgerConflictError('the budget ledger manifest in Redis was changed by someone else (another operator replica?)');
    return String(version);
  }
}
