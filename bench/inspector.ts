// A client for a benchmarked process's V8 inspector, over the WebSocket node --inspect serves (Node's global
// WebSocket, no dependency): the process is started with --inspect=127.0.0.1:PORT on a port the benchmark chose,
// the session's address is read from the inspector's /json/list, and each protocol command is answered by id.
// Worker threads (the sidecar's span writer) are reached through the main session's NodeWorker domain, which
// carries their protocol messages as strings. Loopback only: the inspector runs any code it is sent.

import { waitFor } from '../test/support/wait-for.ts';

export interface ProtocolSession {
  /** Sends one protocol command and resolves with its result (rejects with the inspector's error). */
  send<T = unknown>(method: string, params?: Record<string, unknown>): Promise<T>;
}

export interface InspectorSession extends ProtocolSession {
  /** Sessions with the process's worker threads running now, each named by its title. */
  workers(): Promise<{ title: string; session: ProtocolSession }[]>;
  close(): void;
}

interface Message {
  id?: number;
  result?: unknown;
  error?: { message: string };
  method?: string;
  params?: Record<string, unknown>;
}

/** One thread's commands in flight, answered by id; `post` carries a command's text to the thread. */
class Commands implements ProtocolSession {
  #lastId = 0;
  readonly #pending = new Map<number, { done(result: unknown): void; fail(error: Error): void }>();
  readonly #post: (text: string) => void;

  constructor(post: (text: string) => void) {
    this.#post = post;
  }

  send<T>(method: string, params: Record<string, unknown> = {}): Promise<T> {
    const id = ++this.#lastId;
    return new Promise<T>((done, fail) => {
      this.#pending.set(id, { done: (result) => done(result as T), fail });
      this.#post(JSON.stringify({ id, method, params }));
    });
  }

  /** Settles the command a reply answers (events and unknown ids are ignored). */
  answer(reply: Message): void {
    const waiting = reply.id === undefined ? undefined : this.#pending.get(reply.id);
    if (!waiting) return;
    this.#pending.delete(reply.id!);
    if (reply.error) waiting.fail(new Error(`inspector: ${reply.error.message}`));
    else waiting.done(reply.result);
  }

  failAll(error: Error): void {
    for (const waiting of this.#pending.values()) waiting.fail(error);
    this.#pending.clear();
  }
}

/** The node flag that opens the inspector on `port`, to go among a benchmarked process's node arguments. */
export function inspectFlag(port: number): string {
  return `--inspect=127.0.0.1:${port}`;
}

async function openSocket(port: number): Promise<WebSocket> {
  const address = await waitFor(
    `the inspector on port ${port}`,
    async () => {
      const targets = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as { webSocketDebuggerUrl?: string }[];
      return targets[0]?.webSocketDebuggerUrl;
    },
    { timeoutMs: 10_000 },
  );
  const socket = new WebSocket(address);
  await new Promise<void>((open, fail) => {
    socket.addEventListener('open', () => open(), { once: true });
    socket.addEventListener('error', () => fail(new Error(`inspector: cannot connect to ${address}`)), { once: true });
  });
  return socket;
}

/** Opens a session with the main thread of the process whose inspector listens on `port`. */
export async function connectInspector(port: number): Promise<InspectorSession> {
  const socket = await openSocket(port);
  const main = new Commands((text) => socket.send(text));
  const workers = new Map<string, { title: string; commands: Commands }>();
  socket.addEventListener('message', (event: MessageEvent) => {
    const message = JSON.parse(event.data as string) as Message;
    if (message.method === 'NodeWorker.attachedToWorker') {
      const { sessionId, workerInfo } = message.params as { sessionId: string; workerInfo: { title: string } };
      const toWorker = (text: string) => main.send('NodeWorker.sendMessageToWorker', { sessionId, message: text }).catch(() => undefined);
      workers.set(sessionId, { title: workerInfo.title, commands: new Commands((text) => void toWorker(text)) });
    } else if (message.method === 'NodeWorker.receivedMessageFromWorker') {
      const { sessionId, message: text } = message.params as { sessionId: string; message: string };
      workers.get(sessionId)?.commands.answer(JSON.parse(text) as Message);
    } else main.answer(message);
  });
  socket.addEventListener('close', () => {
    const closed = new Error('inspector: the session closed before answering');
    main.failAll(closed);
    for (const { commands } of workers.values()) commands.failAll(closed);
  });
  return {
    send: (method, params) => main.send(method, params),
    async workers() {
      // The inspector attaches the workers already running before it answers this command.
      await main.send('NodeWorker.enable', { waitForDebuggerOnStart: false });
      return [...workers.values()].map(({ title, commands }) => ({ title, session: commands }));
    },
    close: () => socket.close(),
  };
}
