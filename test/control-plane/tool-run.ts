// Runs a command-line client (kubectl, helm) to completion and hands back its exit code and output.

import { spawn } from 'node:child_process';

export interface ToolResult {
  code: number;
  stdout: string;
  stderr: string;
}

// Enough for any listing a test makes; a runaway command is cut off rather than filling memory.
const MAX_OUTPUT_BYTES = 32 * 1024 * 1024;

export function runTool(command: string, args: string[], opts: { env: NodeJS.ProcessEnv; input?: string; cwd?: string }): Promise<ToolResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env: opts.env, cwd: opts.cwd, stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let size = 0;
    let truncated = false;
    const collect = (into: Buffer[]) => (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_OUTPUT_BYTES) {
        if (!truncated) child.kill('SIGKILL');
        truncated = true;
        return;
      }
      into.push(chunk);
    };
    child.stdout.on('data', collect(out));
    child.stderr.on('data', collect(err));
    child.once('error', reject);
    child.once('close', (code, signal) => {
      let stderr = Buffer.concat(err).toString('utf8');
      if (truncated) stderr += `\n[output exceeded ${MAX_OUTPUT_BYTES} bytes; ${command} was killed]`;
      resolve({ code: code ?? (signal ? 128 : 1), stdout: Buffer.concat(out).toString('utf8'), stderr });
    });
    child.stdin.on('error', () => {}); // the tool may exit before reading all input
    child.stdin.end(opts.input ?? '');
  });
}
