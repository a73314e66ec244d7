// What SQLite's page cache buys a span file on tmpfs, as a sidecar keeps it (ADR 0005): for each cache size, a
// fresh process fills a 20,000-span ring on /dev/shm, then writes 40,000 more in batches of 100 and reports the
// CPU per span written and its private memory (RssAnon) once the ring has turned over.
// Usage: node bench/span-cache.ts [KiB ...]   (default: 128 1024 4096 16000; 16000 is better-sqlite3's default)

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statfsSync } from 'node:fs';
import { join } from 'node:path';
import { sampleSpan } from '../test/support/sample-span.ts';
import { openSqliteSpanStore } from '../sidecar/src/spans/sqlite-span-store.ts';

const TMPFS_MAGIC = 0x01021994;
const RING = 20_000;
const BATCH = 100;
const MEASURED_BATCHES = 400;

function privateMib(): number {
  return Number(/RssAnon:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))![1]) / 1024;
}

async function measure(cacheKib: number): Promise<void> {
  const dir = mkdtempSync('/dev/shm/tollgate-span-cache-');
  try {
    const store = openSqliteSpanStore(join(dir, 'spans.db'), { maxSpans: RING, pageCacheKib: cacheKib });
    let n = 0;
    const batch = () => Array.from({ length: BATCH }, () => sampleSpan({ userId: `user-${n % 50}`, requestId: `req-${n++}` }));
    for (let b = 0; b < (RING / BATCH) * 1.5; b++) await store.insertBatch(batch());
    const before = process.cpuUsage();
    for (let b = 0; b < MEASURED_BATCHES; b++) await store.insertBatch(batch());
    const cpu = process.cpuUsage(before);
    const perSpanUs = (cpu.user + cpu.system) / (MEASURED_BATCHES * BATCH);
    console.log(JSON.stringify({ cacheKib, perSpanUs: Number(perSpanUs.toFixed(1)), privateMib: Number(privateMib().toFixed(1)) }));
    await store.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const child = process.env.TOLLGATE_SPAN_CACHE_KIB;
if (child) {
  await measure(Number(child));
} else {
  if (statfsSync('/dev/shm').type !== TMPFS_MAGIC) throw new Error('/dev/shm is not tmpfs here: this benchmark measures a span file in memory');
  const sizes = process.argv.slice(2).map(Number);
  for (const kib of sizes.length > 0 ? sizes : [128, 1024, 4096, 16000]) {
    // a process per size, with the sidecar image's heap flags, so one size's memory does not carry into the next
    const out = execFileSync(process.execPath, ['--max-semi-space-size=2', '--max-old-space-size=64', import.meta.filename], {
      env: { ...process.env, TOLLGATE_SPAN_CACHE_KIB: String(kib) },
      encoding: 'utf8',
    });
    process.stdout.write(out);
  }
}
