// Runs a host command to completion (ip, mount, tar, npm, ctr, apt-get …) and fails with its output when it
// fails, so an error names the command and what it printed.

import { spawn, spawnSync } from 'node:child_process';

export interface CommandOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  input?: string;
  /** Stream the command's stderr to ours as it runs (long builds); its output is still kept for errors. */
  showProgress?: boolean;
  /** Exit codes that count as success (default [0]). */
  okCodes?: number[];
}

export interface CommandResult {
  code: number;
  stdout: string;
  stderr: string;
}

const KEEP_BYTES = 64 * 1024;

function describe(command: string, args: string[]): string {
  return [command, ...args].map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : JSON.stringify(a))).join(' ');
}

export class CommandError extends Error {
  readonly command: string;
  readonly result: CommandResult;

  constructor(command: string, result: CommandResult) {
    const output = `${result.stderr}\n${result.stdout}`.trim().slice(-4000);
    super(`\`${command}\` failed with exit code ${result.code}${output ? `:\n${output}` : ''}`);
    this.name = 'CommandError';
    this.command = command;
    this.result = result;
  }
}

export function run(command: string, args: string[], opts: CommandOptions = {}): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: opts.cwd, env: opts.env ?? process.env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
      if (stdout.length > 4 * KEEP_BYTES) stdout = stdout.slice(-KEEP_BYTES);
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      if (opts.showProgress) process.stderr.write(chunk);
      stderr = (stderr + chunk).slice(-KEEP_BYTES);
    });
    child.once('error', (err) => reject(new Error(`could not run ${command}: ${err.message}`)));
    child.once('close', (code, signal) => {
      const result = { code: code ?? (signal ? 128 : 1), stdout, stderr };
      if ((opts.okCodes ?? [0]).includes(result.code)) resolve(result);
      else reject(new CommandError(describe(command, args), result));
    });
    child.stdin.on('error', () => {});
    child.stdin.end(opts.input ?? '');
  });
}

/** The synchronous form, for teardown paths that must also work from an exit handler. */
export function runSync(command: string, args: string[], opts: Omit<CommandOptions, 'showProgress'> = {}): CommandResult {
  const r = spawnSync(command, args, { cwd: opts.cwd, env: opts.env ?? process.env, input: opts.input ?? '', encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  const result = { code: r.status ?? (r.signal ? 128 : 1), stdout: r.stdout ?? '', stderr: r.stderr ?? (r.error ? r.error.message : '') };
  if (!(opts.okCodes ?? [0]).includes(result.code)) throw new CommandError(describe(command, args), result);
  return result;
}

/** True when `command` is on PATH. */
export function onPath(command: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0;
}
