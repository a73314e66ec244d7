// Runs a subcommand's main() in-process with its output captured, as the CLI unit tests read it.

import { PassThrough } from 'node:stream';

type CliMain = (argv: string[], out: NodeJS.WritableStream, err: NodeJS.WritableStream) => Promise<number>;

export async function runCli(main: CliMain, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = new PassThrough();
  const err = new PassThrough();
  let stdout = '';
  let stderr = '';
  out.on('data', (c: Buffer) => (stdout += c.toString()));
  err.on('data', (c: Buffer) => (stderr += c.toString()));
  const code = await main(args, out, err);
  return { code, stdout, stderr };
}
