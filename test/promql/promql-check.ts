// Runs Prometheus's own PromQL parser (promql-check, built by build.sh beside this file) over expressions.

import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const BUILD_SCRIPT = join(dirname(fileURLToPath(import.meta.url)), 'build.sh');

async function run(command: string, args: string[], input?: string): Promise<{ code: number | null; stdout: string }> {
  const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'inherit'] });
  let stdout = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stdin.end(input ?? '');
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', resolve);
  });
  return { code, stdout };
}

/** Builds the checker once (about a minute on a cold Go cache) and returns its path. */
export async function ensurePromqlCheck(): Promise<string> {
  const { code, stdout } = await run('bash', [BUILD_SCRIPT]);
  if (code !== 0) throw new Error(`${BUILD_SCRIPT} failed with exit code ${code}`);
  return stdout.trimEnd().split('\n').at(-1) ?? '';
}

/** The parser's complaints about the expressions that do not parse; empty when all do. */
export async function promqlErrors(binary: string, expressions: string[]): Promise<string> {
  const { code, stdout } = await run(binary, [], `${expressions.map((e) => e.replace(/\s*\n\s*/g, ' ')).join('\n')}\n`);
  if (code !== 0 && stdout === '') throw new Error(`${binary} failed with exit code ${code}`);
  return stdout;
}
