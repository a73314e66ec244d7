#!/usr/bin/env node
// Writes the CRD YAML (crds/generated/ and the Helm chart) and the TypeScript API types from crds/*.ts.
//   node crds/generate.ts           regenerate
//   node crds/generate.ts --check   exit 1 naming every stale file (CI), writing nothing
//   --root DIR                      another checkout to write or check (default: this one)

import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { GENERATE_COMMAND, generatedFiles, staleness } from './generated-files.ts';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');

function readIfExists(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

function main(argv: string[]): number {
  let check = false;
  let root = repoRoot;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--check') check = true;
    else if (arg === '--root' && argv[i + 1] !== undefined) root = resolve(argv[++i]!);
    else {
      process.stderr.write(`generate: unknown argument ${arg}\nusage: ${GENERATE_COMMAND} [--check] [--root DIR]\n`);
      return 2;
    }
  }
  const problems: string[] = [];
  for (const file of generatedFiles()) {
    const path = resolve(root, file.path);
    const problem = staleness(file.path, readIfExists(path), file.content);
    if (problem === undefined) continue;
    if (check) {
      problems.push(problem);
    } else {
      mkdirSync(dirname(path), { recursive: true });
      writeFileSync(path, file.content);
      process.stdout.write(`wrote ${file.path}\n`);
    }
  }
  if (problems.length > 0) {
    process.stderr.write(`${problems.join('\n')}\nRun \`${GENERATE_COMMAND}\` and commit the result.\n`);
    return 1;
  }
  return 0;
}

process.exitCode = main(process.argv.slice(2));
