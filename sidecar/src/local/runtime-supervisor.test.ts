// The supervisor with real child processes: the fake `ollama serve` (test/fakes/ollama-cli.ts) run by this
// Node, and commands that never answer, exit at once, ignore SIGTERM or do not exist.

import { resolve } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from '../../../test/e2e/proxy-process.ts';
import { waitFor } from '../../../test/support/wait-for.ts';
import { OllamaApi } from './ollama-api.ts';
import { RuntimeControlError, RuntimeSupervisor, childEnvironment } from './runtime-supervisor.ts';

const FAKE_CLI = resolve(import.meta.dirname, '../../../test/fakes/ollama-cli.ts');
const api = new OllamaApi();
const supervisors: RuntimeSupervisor[] = [];

function lines(): { logger: pino.Logger; records: Record<string, unknown>[] } {
  const records: Record<string, unknown>[] = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => records.push(JSON.parse(line) as Record<string, unknown>) });
  return { logger, records };
}

async function supervisor(command: string[], opts: { env?: NodeJS.ProcessEnv; startTimeoutMs?: number; stopGraceMs?: number } = {}) {
  const baseUrl = `http://127.0.0.1:${await freePort()}`;
  const log = lines();
  const s = new RuntimeSupervisor({
    api,
    settings: () => ({ baseUrl, command, startTimeoutMs: opts.startTimeoutMs ?? 15_000 }),
    logger: log.logger,
    env: { PATH: process.env.PATH, ...opts.env },
    pollIntervalMs: 20,
    ...(opts.stopGraceMs === undefined ? {} : { stopGraceMs: opts.stopGraceMs }),
  });
  supervisors.push(s);
  return { s, baseUrl, records: log.records };
}

const fakeServe = [process.execPath, FAKE_CLI, 'serve'];

afterEach(async () => {
  await Promise.all(supervisors.splice(0).map((s) => s.shutdown()));
});

describe('RuntimeSupervisor', () => {
  it('starts the command once, health-checked; a second start finds it running; stop ends it, and a second stop finds nothing', async () => {
    const { s, baseUrl } = await supervisor(fakeServe);
    const started = await s.start();
    expect(started).toMatchObject({ status: 'started', managed: true, version: '0.12.6' });
    const pid = (started as { pid: number }).pid;
    expect(await api.version(baseUrl)).toBe('0.12.6');
    // Concurrent starts share the one start.
    expect(await Promise.all([s.start(), s.start()])).toEqual([
      { status: 'already_running', managed: true, pid },
      { status: 'already_running', managed: true, pid },
    ]);
    expect(s.view()).toMatchObject({ state: 'running', pid, command: fakeServe });
    expect(s.logs().lines.join('\n')).toContain(`Listening on ${new URL(baseUrl).host}`);

    expect(await s.stop()).toEqual({ status: 'stopped', pid, code: 0, signal: null });
    await expect(api.version(baseUrl)).rejects.toThrow();
    expect(s.view()).toMatchObject({ state: 'stopped', pid: null, exit: { code: 0, stoppedByProxy: true } });
    expect(await s.stop()).toEqual({ status: 'not_running' });
  });

  it('reports a command that exits before it answers, with its exit code and last lines', async () => {
    const { s } = await supervisor(fakeServe, { env: { FAKE_OLLAMA_EXIT: '3' } });
    const failure = await s.start().catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(RuntimeControlError);
    expect(failure).toMatchObject({ code: 'local_runtime_start_failed', statusCode: 502 });
    expect((failure as Error).message).toMatch(/exited before its API answered \(exit code 3\)\. Its last lines: .*could not create blob directory/);
    expect(s.view()).toMatchObject({ state: 'exited', exit: { code: 3, stoppedByProxy: false } });
  });

  it('reports a command that cannot be run, naming it', async () => {
    const { s } = await supervisor(['tollgate-no-such-runtime', 'serve']);
    await expect(s.start()).rejects.toThrow('could not run "tollgate-no-such-runtime serve": spawn tollgate-no-such-runtime ENOENT; install Ollama or set local.runtime.command');
    expect(s.view().state).toBe('not_started');
  });

  it('stops a command that never answers once its start time is up', async () => {
    const { s } = await supervisor([process.execPath, '-e', 'setInterval(() => {}, 1000)'], { startTimeoutMs: 300 });
    const failure = await s.start().catch((error: unknown) => error);
    expect(failure).toMatchObject({ code: 'local_runtime_start_failed', statusCode: 504 });
    expect((failure as Error).message).toContain('did not answer at http://127.0.0.1:');
    expect(s.view()).toMatchObject({ state: 'stopped', pid: null, exit: { signal: 'SIGTERM', stoppedByProxy: true } });
  });

  it('kills a runtime that ignores SIGTERM after the grace period', async () => {
    const { s, records } = await supervisor(fakeServe, { env: { FAKE_OLLAMA_IGNORE_SIGTERM: '1' }, stopGraceMs: 300 });
    const { pid } = (await s.start()) as { pid: number };
    expect(await s.stop()).toEqual({ status: 'stopped', pid, code: null, signal: 'SIGKILL' });
    expect(records.some((record) => record.msg === 'local runtime did not stop within its grace period; killing it')).toBe(true);
  });

  it('notices a runtime that dies on its own, and logs its last lines', async () => {
    const { s, records } = await supervisor(fakeServe);
    const { pid } = (await s.start()) as { pid: number };
    process.kill(pid, 'SIGKILL');
    await waitFor('the exit to be noticed', () => s.view().state === 'exited', 5_000);
    expect(s.view().exit).toMatchObject({ signal: 'SIGKILL', stoppedByProxy: false });
    const line = records.find((record) => record.msg === 'local runtime exited');
    expect(line).toMatchObject({ pid, signal: 'SIGKILL' });
    expect(String(line?.last_lines)).toContain('Listening on');
    expect(await s.stop()).toEqual({ status: 'not_running' });
  });

  it('uses a runtime that already answers without starting another, and will not stop it', async () => {
    const { s: outside, baseUrl } = await supervisor(fakeServe);
    await outside.start();
    const log = lines();
    const s = new RuntimeSupervisor({ api, settings: () => ({ baseUrl, command: ['ollama', 'serve'], startTimeoutMs: 1000 }), logger: log.logger });
    expect(await s.start()).toEqual({ status: 'already_running', managed: false, version: '0.12.6' });
    await expect(s.stop()).rejects.toMatchObject({ code: 'local_runtime_not_managed', statusCode: 409 });
  });
});

describe('childEnvironment', () => {
  it("withholds the proxy's provider credentials and its own settings, and says where to listen", () => {
    expect(
      childEnvironment(
        {
          PATH: '/usr/bin',
          HOME: '/home/dev',
          OPENAI_API_KEY: 'sk',
          ANTHROPIC_API_KEY: 'a',
          AWS_SECRET_ACCESS_KEY: 's',
          GOOGLE_APPLICATION_CREDENTIALS: '/k.json',
          TOLLGATE_PORT: '8181',
          OLLAMA_MODELS: '/m',
          OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer collector-secret',
          OTEL_EXPORTER_OTLP_ENDPOINT: 'https://collector.example',
        },
        'http://127.0.0.1:11500',
      ),
    ).toEqual({ PATH: '/usr/bin', HOME: '/home/dev', OLLAMA_MODELS: '/m', OLLAMA_HOST: '127.0.0.1:11500' });
  });
});
