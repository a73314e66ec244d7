// The steps of "Try it on your machine" in docs/budgets.md, read from the page itself, so the e2e test runs
// what a new user copies: the fake provider's command line, the config file, the proxy's environment, the
// openai SDK script and the grant. A change to the page that breaks a step fails the test naming the step.

import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { waitFor } from '../support/wait-for.ts';
import { freePort } from './proxy-process.ts';

export const ROOT = resolve(import.meta.dirname, '../..');

export interface Walkthrough {
  /** Arguments of `./tollgatew node test/fakes/llm-upstream-cli.ts …`, script path first. */
  fakeArgs: string[];
  /** The fake's address as the config file names it. */
  fakeUrl: string;
  configYaml: string;
  /** Variables set on the proxy's command line. */
  proxyEnv: Record<string, string>;
  /** The ES module given to `node --input-type=module -e`. */
  sdkScript: string;
  /** The JSON the `curl … /grants` step posts. */
  grantBody: string;
}

function step<T>(section: string, name: string, pattern: RegExp, pick: (match: RegExpMatchArray) => T): T {
  const match = section.match(pattern);
  if (!match) throw new Error(`docs/budgets.md, "Try it on your machine": no ${name} step (${pattern})`);
  return pick(match);
}

export function walkthrough(): Walkthrough {
  const page = readFileSync(resolve(ROOT, 'docs/budgets.md'), 'utf8');
  const start = page.indexOf('## Try it on your machine');
  if (start === -1) throw new Error('docs/budgets.md has no "Try it on your machine" section');
  const section = page.slice(start, page.indexOf('\n## ', start + 1));
  return {
    fakeArgs: step(section, 'fake provider', /^\.\/tollgatew node (test\/fakes\/llm-upstream-cli\.ts [^\n]+)$/m, (m) => m[1]!.trim().split(/\s+/)),
    fakeUrl: step(section, 'upstream URL', /baseUrl: "(http:\/\/127\.0\.0\.1:\d+)"/, (m) => m[1]!),
    configYaml: step(section, 'config file', /<<'YAML'\n([\s\S]*?)^YAML$/m, (m) => m[1]!),
    proxyEnv: step(section, 'proxy command', /^((?:\w+=\S+ )+)\.\/tollgatew proxy --config \S+$/m, (m) =>
      Object.fromEntries(
        m[1]!
          .trim()
          .split(/\s+/)
          .map((pair) => pair.split('=', 2) as [string, string]),
      ),
    ),
    sdkScript: step(section, 'SDK script', /node --input-type=module -e '\n([\s\S]*?)'$/m, (m) => m[1]!),
    grantBody: step(section, 'grant', /\/grants[^\n]*\\\n\s*-d '([^']+)'/, (m) => m[1]!),
  };
}

export interface RunningCommand {
  url: string;
  stop(): Promise<void>;
}

/** The walkthrough's fake provider as its own process, on a free port instead of the page's fixed one. */
export async function startFakeProvider(args: string[]): Promise<RunningCommand> {
  const port = await freePort();
  const withPort = args.map((arg, i) => (args[i - 1] === '--port' ? String(port) : arg));
  const child = spawn(process.execPath, withPort, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (text: string) => (out += text));
  child.stderr.setEncoding('utf8').on('data', (text: string) => (out += text));
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  const gone = new AbortController();
  void exited.then(() => gone.abort());
  const url = await waitFor('the fake provider to print its address', () => out.match(/^fake \w+ API: (http:\S+)$/m)?.[1], { timeoutMs: 20_000, signal: gone.signal }).catch(
    (error: unknown) => {
      child.kill('SIGKILL');
      throw new Error(`the fake provider did not start: ${out}`, { cause: error });
    },
  );
  return {
    url,
    stop: async () => {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/** Runs a command to its end: exit code and output. */
export function runToEnd(command: string, args: string[], opts: { cwd: string }): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done, fail) => {
    const child = spawn(command, args, { cwd: opts.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (text: string) => (stdout += text));
    child.stderr.setEncoding('utf8').on('data', (text: string) => (stderr += text));
    child.once('error', fail);
    child.once('close', (code) => done({ code, stdout, stderr }));
  });
}
