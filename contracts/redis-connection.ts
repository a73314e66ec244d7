// The connection to the Redis-compatible counter store (ADR 1310), as the engines' ledger and rate windows and
// the operator's cluster ledger (ADR 1314) open it.

import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import type { BudgetRedisConfig } from './budget-config.ts';

/** A command that takes longer fails; the ledger retries its batch by id (the marker recognises a late landing). */
const COMMAND_TIMEOUT_MS = 5_000;

/** The password from the environment variable or file the config names; never from the config itself. */
function password(config: BudgetRedisConfig): string | undefined {
  if (config.passwordEnv !== undefined) {
    const value = process.env[config.passwordEnv];
    if (value === undefined || value === '') throw new Error(`the Redis store's password variable ${config.passwordEnv} is not set`);
    return value;
  }
  if (config.passwordFile !== undefined) return readFileSync(config.passwordFile, 'utf8').trim();
  return undefined;
}

export function openRedisClient(config: BudgetRedisConfig, commandTimeoutMs = COMMAND_TIMEOUT_MS): Redis {
  const secret = password(config);
  const client = new Redis(config.url, {
    ...(secret === undefined ? {} : { password: secret }),
    // A command to a store that is down fails soon and the caller falls back on memory (the ledger retries its
    // batch later); the client's own offline queue would only hold it longer.
    maxRetriesPerRequest: 1,
    commandTimeout: commandTimeoutMs,
    retryStrategy: (times) => Math.min(times * 200, 2_000),
  });
  // Reconnection is the client's job; its errors reach the callers through the commands that fail, named by
  // storeError (ioredis itself only says that its retries ran out).
  client.on('error', (error: Error) => lastConnectError.set(client, error.message));
  client.on('ready', () => lastConnectError.delete(client));
  return client;
}

const lastConnectError = new WeakMap<Redis, string>();

/** A failed command's error, saying which store could not be reached and why when the connection is down. */
export function storeError(client: Redis, url: string, error: unknown): Error {
  const cause = lastConnectError.get(client);
  if (cause === undefined || client.status === 'ready') return error instanceof Error ? error : new Error(String(error));
  return new Error(`the Redis store at ${new URL(url).host} cannot be reached: ${cause}`, { cause: error });
}
