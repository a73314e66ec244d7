// How a call ends its upstream exchange early: the caller left, or its body passed the size limit or the
// deadline. An EventEmitter rather than an AbortController: undici listens to an emitter's 'abort' with once(),
// where an AbortSignal costs an EventTarget listener added and removed on every call (about 10 µs of CPU a call,
// bench/stage-profile.ts). It has no `aborted` property on purpose: undici takes any object that has one for an
// AbortSignal and goes back to EventTarget.

import { EventEmitter } from 'node:events';

export class CallAbort extends EventEmitter {
  #ended = false;
  #reason: unknown = undefined;

  /** Set once abort() was called. */
  get ended(): boolean {
    return this.#ended;
  }

  /** Why the call was ended; undici rejects the upstream request with it. */
  get reason(): unknown {
    return this.#reason;
  }

  /** Ends the exchange (the first reason counts); an upstream request already under way is aborted with `reason`. */
  abort(reason: unknown): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#reason = reason;
    this.emit('abort');
  }
}
