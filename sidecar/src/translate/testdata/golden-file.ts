// Golden files for the translation tests: the expected output of a translation, reviewed by a person and
// committed. `UPDATE_GOLDEN=1 npx vitest run sidecar/src/translate` rewrites them after a deliberate change;
// the diff is then the review.

import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';

const DIR = import.meta.dirname;

export function testdata(name: string): string {
  return readFileSync(join(DIR, name), 'utf8');
}

export function testdataJson(name: string): Record<string, unknown> {
  return JSON.parse(testdata(name)) as Record<string, unknown>;
}

export function expectGolden(name: string, actual: unknown): void {
  const path = join(DIR, name);
  const text = typeof actual === 'string' ? actual : `${JSON.stringify(actual, null, 2)}\n`;
  if (process.env.UPDATE_GOLDEN === '1' || !existsSync(path)) {
    writeFileSync(path, text);
    if (process.env.UPDATE_GOLDEN !== '1') throw new Error(`golden file ${name} was missing and has been written: review it and run again`);
    return;
  }
  expect(text).toBe(readFileSync(path, 'utf8'));
}
