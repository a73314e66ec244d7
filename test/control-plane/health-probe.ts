// Start-up waits: poll a health endpoint until it answers, failing early with the process's log when the
// process dies first, and with the last probe error when time runs out.

import { request } from 'node:https';
import type { ManagedProcess } from './managed-process.ts';

export interface TlsClient {
  caPem: string;
  certPem: string;
  keyPem: string;
}

export interface ProbeResult {
  status: number;
  body: string;
}

const PROBE_TIMEOUT_MS = 5_000;
const POLL_INTERVAL_MS = 150;

export async function httpGet(url: string): Promise<ProbeResult> {
  const res = await fetch(url, { signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) });
  return { status: res.status, body: await res.text() };
}

export function httpsGet(url: string, tls: TlsClient): Promise<ProbeResult> {
  return new Promise((resolve, reject) => {
    const req = request(url, { ca: tls.caPem, cert: tls.certPem, key: tls.keyPem, agent: false, timeout: PROBE_TIMEOUT_MS }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer from ${url} within ${PROBE_TIMEOUT_MS} ms`)));
    req.on('error', reject);
    req.end();
  });
}

export class StartupError extends Error {
  readonly code = 'CONTROL_PLANE_STARTUP_FAILED';
  constructor(message: string) {
    super(message);
    this.name = 'StartupError';
  }
}

/** Polls probe until it returns true; throws StartupError with the log tail if proc exits or time runs out. */
export async function waitUntilHealthy(proc: ManagedProcess, what: string, probe: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastProblem = 'no answer yet';
  for (;;) {
    if (proc.hasExited()) {
      throw new StartupError(`${proc.name} ${await proc.exited} before ${what}; last lines of ${proc.logPath}:\n${proc.logTail()}`);
    }
    try {
      if (await probe()) return;
      lastProblem = 'not ready';
    } catch (err) {
      lastProblem = err instanceof Error ? err.message : String(err);
    }
    if (Date.now() > deadline) {
      throw new StartupError(`${proc.name}: no ${what} within ${timeoutMs / 1000} s (${lastProblem}); last lines of ${proc.logPath}:\n${proc.logTail()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_INTERVAL_MS));
  }
}
