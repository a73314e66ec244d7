// The local runtime as a child process the proxy supervises (POST /_local/api/start and /stop): started
// from local.runtime.command without a shell, its output kept in a bounded ring (and logged at debug),
// health-checked until its API answers, and stopped when asked or when the proxy stops. A runtime the
// developer started elsewhere is used as it is and never stopped from here.
//
// Outcomes are plain answers, not errors, whenever the runtime is already where the caller wants it: a second
// start finds it running, a stop finds it stopped (ADR 1401).

import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { LogRing } from './log-ring.ts';
import type { OllamaApi } from './ollama-api.ts';

export type RuntimeProcessState = 'not_started' | 'starting' | 'running' | 'stopping' | 'stopped' | 'exited';

export interface RuntimeProcessView {
  state: RuntimeProcessState;
  command: string[];
  pid: number | null;
  startedAt: string | null;
  /** How the last child ended: its exit code or signal, and whether this proxy stopped it. */
  exit: { code: number | null; signal: string | null; stoppedByProxy: boolean; at: string } | null;
  /** The last lines it wrote (stdout and stderr, in order). */
  logTail: string[];
}

export type StartOutcome =
  | { status: 'started'; managed: true; pid: number; version: string }
  | { status: 'already_running'; managed: true; pid: number }
  | { status: 'already_running'; managed: false; version: string };

export type StopOutcome = { status: 'stopped'; pid: number; code: number | null; signal: string | null } | { status: 'not_running' };

/** Why a start or stop did not happen; `code` is the API's error code. */
export class RuntimeControlError extends Error {
  readonly code: 'local_runtime_start_failed' | 'local_runtime_not_managed';
  readonly statusCode: number;
  constructor(code: RuntimeControlError['code'], statusCode: number, message: string) {
    super(message);
    this.name = 'RuntimeControlError';
    this.code = code;
    this.statusCode = statusCode;
  }
}

export interface RuntimeSupervisorOptions {
  api: OllamaApi;
  /** Live settings: read at each start. */
  settings: () => { baseUrl: string; command: string[]; startTimeoutMs: number };
  logger: Logger;
  env?: NodeJS.ProcessEnv;
  /** Pause between health checks while starting. */
  pollIntervalMs?: number;
  /** How long a stopped child may take to exit before it is killed. */
  stopGraceMs?: number;
}

/**
 * Credentials the proxy holds are not the runtime's business: the child gets the proxy's environment without
 * them (and OLLAMA_HOST set to the address the proxy will look for it at). OTEL_* configures the proxy's own
 * span export, whose headers carry the collector's credentials.
 */
const WITHHELD_ENV = /^(OPENAI_API_KEY|ANTHROPIC_API_KEY|GOOGLE_APPLICATION_CREDENTIALS|AWS_[A-Z_]+|TOLLGATE_[A-Z_]+|OTEL_[A-Z_]+)$/;

export function childEnvironment(env: NodeJS.ProcessEnv, baseUrl: string): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(env)) if (!WITHHELD_ENV.test(name)) out[name] = value;
  out.OLLAMA_HOST = new URL(baseUrl).host;
  return out;
}

export class RuntimeSupervisor {
  readonly #opts: RuntimeSupervisorOptions;
  readonly #log: Logger;
  #child: ChildProcess | null = null;
  #exited: Promise<void> | null = null;
  #state: RuntimeProcessState = 'not_started';
  #command: string[];
  #startedAt: string | null = null;
  #exit: RuntimeProcessView['exit'] = null;
  #ring = new LogRing();
  #starting: Promise<StartOutcome> | null = null;
  /** Set when this proxy ends the child, so its exit is reported as a stop rather than a crash. */
  #stoppedByProxy = false;
  #stopping: Promise<StopOutcome> | null = null;
  readonly #killOnExit = (): void => {
    // The proxy is exiting without its shutdown (an uncaught error): the child must not outlive it.
    this.#child?.kill('SIGKILL');
  };

  constructor(opts: RuntimeSupervisorOptions) {
    this.#opts = opts;
    this.#log = opts.logger.child({ component: 'local-runtime' });
    this.#command = opts.settings().command;
  }

  view(): RuntimeProcessView {
    return {
      state: this.#state,
      command: this.#command,
      pid: this.#child?.pid ?? null,
      startedAt: this.#startedAt,
      exit: this.#exit,
      logTail: this.#ring.tail(20),
    };
  }

  logs(): { lines: string[]; dropped: number } {
    return { lines: this.#ring.tail(), dropped: this.#ring.dropped };
  }

  /** Starts the runtime unless it already runs (here or elsewhere); resolves once its API answers. */
  start(): Promise<StartOutcome> {
    const child = this.#child;
    if (child !== null && this.#state === 'running' && child.pid !== undefined) return Promise.resolve({ status: 'already_running', managed: true, pid: child.pid });
    if (this.#starting) return this.#starting.then((outcome) => (outcome.managed ? { status: 'already_running', managed: true, pid: outcome.pid } : outcome));
    if (this.#stopping)
      return Promise.reject(
        new RuntimeControlError('local_runtime_start_failed', 409, 'the local runtime is being stopped; start it again once POST /_local/api/stop has answered'),
      );
    this.#starting = this.#start().finally(() => (this.#starting = null));
    return this.#starting;
  }

  /** Stops the runtime this proxy started; a runtime it did not start is refused, a stopped one is no error. */
  stop(): Promise<StopOutcome> {
    if (this.#stopping) return this.#stopping;
    this.#stopping = this.#stop().finally(() => (this.#stopping = null));
    return this.#stopping;
  }

  /** The proxy is stopping: the child goes with it. */
  async shutdown(): Promise<void> {
    await this.#starting?.catch(() => undefined);
    if (this.#child !== null) await this.stop();
  }

  async #start(): Promise<StartOutcome> {
    const { baseUrl, command, startTimeoutMs } = this.#opts.settings();
    this.#command = command;
    try {
      const version = await this.#opts.api.version(baseUrl);
      return { status: 'already_running', managed: false, version };
    } catch {
      // nothing answers there yet: start it
    }
    const [program, ...args] = command as [string, ...string[]];
    this.#ring = new LogRing();
    this.#state = 'starting';
    this.#exit = null;
    const child = spawn(program, args, { env: childEnvironment(this.#opts.env ?? process.env, baseUrl), stdio: ['ignore', 'pipe', 'pipe'] });
    const spawned = once(child, 'spawn').then(
      () => null,
      (error: Error) => error,
    );
    const failedToSpawn = await spawned;
    if (failedToSpawn !== null) {
      this.#state = 'not_started';
      throw new RuntimeControlError(
        'local_runtime_start_failed',
        502,
        `could not run ${JSON.stringify(command.join(' '))}: ${failedToSpawn.message}; install Ollama or set local.runtime.command`,
      );
    }
    this.#adopt(child);
    const pid = child.pid!;
    this.#log.info({ pid, command, baseUrl }, 'local runtime started; waiting for its API');
    const deadline = Date.now() + startTimeoutMs;
    let lastProblem = 'no answer yet';
    while (Date.now() < deadline) {
      if (this.#child !== child) break; // it exited
      try {
        const version = await this.#opts.api.version(baseUrl);
        this.#state = 'running';
        this.#log.info({ pid, version, baseUrl }, 'local runtime answers');
        return { status: 'started', managed: true, pid, version };
      } catch (error) {
        lastProblem = (error as Error).message;
      }
      await Promise.race([sleep(this.#opts.pollIntervalMs ?? 100), this.#exited]);
    }
    if (this.#child === child) {
      await this.#terminate(child);
      throw new RuntimeControlError(
        'local_runtime_start_failed',
        504,
        `${JSON.stringify(command.join(' '))} did not answer at ${baseUrl} within ${startTimeoutMs} ms (${lastProblem}); it was stopped. Its last lines: ${this.#ring.tail(5).join(' | ')}`,
      );
    }
    const exit = this.view().exit;
    throw new RuntimeControlError(
      'local_runtime_start_failed',
      502,
      `${JSON.stringify(command.join(' '))} exited before its API answered (${exit?.signal ? `signal ${exit.signal}` : `exit code ${exit?.code}`}). Its last lines: ${this.#ring.tail(5).join(' | ') || '(none)'}`,
    );
  }

  async #stop(): Promise<StopOutcome> {
    await this.#starting?.catch(() => undefined);
    const child = this.#child;
    if (child === null) {
      const { baseUrl } = this.#opts.settings();
      let version: string | null = null;
      try {
        version = await this.#opts.api.version(baseUrl);
      } catch {
        return { status: 'not_running' };
      }
      throw new RuntimeControlError(
        'local_runtime_not_managed',
        409,
        `the local runtime at ${baseUrl} (version ${version}) was not started by this proxy: stop it where it was started`,
      );
    }
    const pid = child.pid!;
    await this.#terminate(child);
    const exit = this.#exit;
    this.#log.info({ pid, code: exit?.code ?? null, signal: exit?.signal ?? null }, 'local runtime stopped');
    return { status: 'stopped', pid, code: exit?.code ?? null, signal: exit?.signal ?? null };
  }

  /** SIGTERM, then SIGKILL after the grace period; resolves once the child has exited. */
  async #terminate(child: ChildProcess): Promise<void> {
    this.#state = 'stopping';
    this.#stoppedByProxy = true;
    const exited = this.#exited ?? Promise.resolve();
    child.kill('SIGTERM');
    const grace = new AbortController();
    const graceful = await Promise.race([exited.then(() => true), sleep(this.#opts.stopGraceMs ?? 10_000, false, { signal: grace.signal }).catch(() => false)]);
    grace.abort(); // the grace timer must not keep a stopping proxy alive
    if (!graceful) {
      this.#log.warn({ pid: child.pid }, 'local runtime did not stop within its grace period; killing it');
      child.kill('SIGKILL');
      await exited;
    }
  }

  #adopt(child: ChildProcess): void {
    this.#child = child;
    this.#stoppedByProxy = false;
    this.#startedAt = new Date().toISOString();
    process.once('exit', this.#killOnExit);
    const onLine = (line: string) => this.#log.debug({ pid: child.pid, line }, 'local runtime output');
    child.stdout!.setEncoding('utf8').on('data', (text: string) => this.#ring.write(text, onLine));
    child.stderr!.setEncoding('utf8').on('data', (text: string) => this.#ring.write(text, onLine));
    this.#exited = once(child, 'exit').then((args) => {
      const [code, signal] = args as [number | null, NodeJS.Signals | null];
      process.removeListener('exit', this.#killOnExit);
      this.#ring.end(onLine);
      const stoppedByProxy = this.#stoppedByProxy;
      this.#exit = { code, signal, stoppedByProxy, at: new Date().toISOString() };
      this.#child = null;
      this.#exited = null;
      this.#state = stoppedByProxy ? 'stopped' : 'exited';
      if (!stoppedByProxy) this.#log.warn({ pid: child.pid, code, signal, last_lines: this.#ring.tail(10) }, 'local runtime exited');
    });
  }
}
