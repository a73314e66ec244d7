// Applies a webhook's JSONPatch the way the API server does, so tests see the pod that would be stored.

import type { JsonPatchOperation } from '../src/json-patch.ts';

function parsePointer(path: string): string[] {
  return path
    .split('/')
    .slice(1)
    .map((t) => t.replaceAll('~1', '/').replaceAll('~0', '~'));
}

/** RFC 6902 `add`, strict about parents: the operation the API server applies for a mutating webhook. */
export function applyPatch<T>(document: T, patch: JsonPatchOperation[]): T {
  const doc = structuredClone(document) as unknown;
  for (const op of patch) {
    if (op.op !== 'add') throw new Error(`unexpected op ${op.op}`);
    const tokens = parsePointer(op.path);
    const last = tokens.pop()!;
    let parent: unknown = doc;
    for (const t of tokens) {
      const next: unknown = Array.isArray(parent) ? parent[Number(t)] : (parent as Record<string, unknown>)[t];
      if (next === undefined || next === null || typeof next !== 'object') throw new Error(`${op.path}: ${t} does not exist`);
      parent = next;
    }
    if (Array.isArray(parent)) {
      const index = last === '-' ? parent.length : Number(last);
      if (!(index >= 0 && index <= parent.length)) throw new Error(`${op.path}: index out of range`);
      parent.splice(index, 0, structuredClone(op.value));
    } else {
      (parent as Record<string, unknown>)[last] = structuredClone(op.value);
    }
  }
  return doc as T;
}
