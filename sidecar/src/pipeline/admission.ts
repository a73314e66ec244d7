// Admission, the pipeline's first step (ADR 1700), for /proxy and every /v1 API: a proxy that is draining takes
// no new call (503 `shutting_down`, and the connection closes so the caller's retry goes to another instance);
// an admitted call is tracked until it ends, so the drain waits for it, streams included.

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ProxyError } from '../errors.ts';
import type { Lifecycle } from '../lifecycle.ts';
import { closeConnectionAfter } from './caller-connection.ts';
import { shuttingDown } from './refusals.ts';

/**
 * The call's end for the drain to wait on, or null when it was refused: then `answer` has been given the
 * refusal to send in the surface's error shape, and the rest of the request is read and dropped.
 */
export function admitCall(lifecycle: Lifecycle, request: IncomingMessage, res: ServerResponse, answer: (error: ProxyError) => void): (() => void) | null {
  if (!lifecycle.draining) return lifecycle.track();
  closeConnectionAfter(res);
  answer(shuttingDown());
  request.resume();
  return null;
}
