// A fake `ollama` command for the runtime supervisor's tests: `ollama serve` starts the fake Ollama server
// (./ollama.ts) where OLLAMA_HOST says, as the real one does (default 127.0.0.1:11434), logs the way it does,
// and stops on SIGTERM or SIGINT. FAKE_OLLAMA_MODELS (comma-separated) are its pulled models.
// FAKE_OLLAMA_EXIT=<code> makes `serve` print an error and exit at once (a runtime that cannot start), and
// FAKE_OLLAMA_IGNORE_SIGTERM=1 makes it ignore SIGTERM (a runtime that must be killed).
//
// fakeOllamaBinDir() writes an executable `ollama` into a temporary folder, to put first on PATH.

import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FAKE_OLLAMA_VERSION, startFakeOllama } from './ollama.ts';

export function fakeOllamaBinDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'fake-ollama-bin-'));
  const script = join(dir, 'ollama');
  writeFileSync(script, `#!/bin/sh\nexec "${process.execPath}" "${import.meta.filename}" "$@"\n`);
  chmodSync(script, 0o755);
  return dir;
}

function log(level: string, msg: string): void {
  process.stderr.write(`time=${new Date().toISOString()} level=${level} source=routes.go msg="${msg}"\n`);
}

async function serve(): Promise<void> {
  if (process.env.FAKE_OLLAMA_EXIT) {
    log('ERROR', 'could not create blob directory: permission denied');
    process.exit(Number(process.env.FAKE_OLLAMA_EXIT));
  }
  const [host = '127.0.0.1', port = '11434'] = (process.env.OLLAMA_HOST ?? '127.0.0.1:11434').replace(/^https?:\/\//, '').split(':');
  const models = process.env.FAKE_OLLAMA_MODELS?.split(',').filter((name) => name !== '');
  const server = await startFakeOllama({ host, port: Number(port), ...(models ? { models } : {}) });
  log('INFO', `Listening on ${host}:${port} (version ${FAKE_OLLAMA_VERSION})`);
  const stop = (signal: string) => {
    if (signal === 'SIGTERM' && process.env.FAKE_OLLAMA_IGNORE_SIGTERM === '1') {
      log('INFO', 'ignoring SIGTERM');
      return;
    }
    log('INFO', `received ${signal}, shutting down`);
    void server.close().then(() => process.exit(0));
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

if (process.argv[1] === import.meta.filename) {
  const command = process.argv[2];
  if (command === 'serve') {
    await serve();
  } else if (command === '--version' || command === '-v') {
    process.stdout.write(`ollama version is ${FAKE_OLLAMA_VERSION}\n`);
  } else {
    process.stderr.write('Usage:\n  ollama [command]\n\nAvailable Commands:\n  serve       Start ollama\n');
    process.exit(1);
  }
}
