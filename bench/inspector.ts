// A client for a benchmarked process's V8 inspector, over the WebSocket node --inspect serves (Node's global
// WebSocket, no dependency): the process is started with --inspect=127.0.0.1:PORT on a port the benchmark chose,
// the session's address is read from the inspector's /json/list, and each protocol command is answered by id.
// Loopback only: the inspector runs any code it is sent.

import { waitFor } from '../test/support/wait-for.ts';

export interface InspectorSession {
  /** Sends one protocol command and resolves with its result (rejects with the inspector's error). */
  send<T = unknown>(method: string, params?: Record<string, unknown>): Promise<T>;
  close(): void;
}

interface Reply {
  id?: number;
  result?: unknown;
  error?: { message: string };
}

/** The node flag that opens the inspector on `port`, to go among a benchmarked process's node arguments. */
export function inspectFlag(port: number): string {
  return `--inspect=127.0.0.1:${port}`;
}

/** Opens a session with the main thread of the process whose inspector listens on `port`. */
export async function connectInspector(port: number): Promise<InspectorSession> {
  const address = await waitFor(
    `the inspector on port ${port}`,
    async () => {
      const targets = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as { webSocketDebuggerUrl?: string }[];
      return targets[0]?.webSocketDebuggerUrl;
    },
    { timeoutMs: 10_000 },
  );
  const socket = new WebSocket(address);
  const pending = new Map<number, { done(result: unknown): void; fail(error: Error): void }>();
  socket.addEventListener('message', (event: MessageEvent) => {
    const reply = JSON.parse(event.data as string) as Reply;
    const waiting = reply.id === undefined ? undefined : pending.get(reply.id);
    if (!waiting) return; // an event, not an answer
    pending.delete(reply.id!);
    if (reply.error) waiting.fail(new Error(`inspector: ${reply.error.message}`));
    else waiting.done(reply.result);
  });
  socket.addEventListener('close', () => {
    for (const waiting of pending.values()) waiting.fail(new Error('inspector: the session closed before answering'));
    pending.clear();
  });
  await new Promise<void>((open, fail) => {
    socket.addEventListener('open', () => open(), { once: true });
    socket.addEventListener('error', () => fail(new Error(`inspector: cannot connect to ${address}`)), { once: true });
  });
  let lastId = 0;
  return {
    send<T>(method: string, params: Record<string, unknown> = {}) {
      const id = ++lastId;
      return new Promise<T>((done, fail) => {
        pending.set(id, { done, fail });
        socket.send(JSON.stringify({ id, method, params }));
      });
    },
    close: () => socket.close(),
  };
}
