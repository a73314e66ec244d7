// How the caller ended its call early, if it did (left, or a body over its limit or too slow), for /proxy and
// every /v1 API: it aborts the upstream exchange and names the span's error, since the upstream request then
// fails only because the proxy aborted it. Once the answer is being relayed a caller who leaves no longer
// ends the exchange: the relay reads on for the usage the provider bills (ADR 1305).

import type { ServerResponse } from 'node:http';
import type { ProxyError } from '../errors.ts';
import { CallAbort } from '../upstream/call-abort.ts';
import { onCallerLeaving } from './caller-connection.ts';
import { callerLeft } from './request-body.ts';

export class CallerEnd {
  /** Aborts the upstream request when the caller goes away or its streamed body passes the limit or the deadline. */
  readonly abort = new CallAbort();
  error: ProxyError | null = null;
  /** Set once the answer is being relayed (see above). */
  relaying = false;

  constructor(res: ServerResponse) {
    onCallerLeaving(res, () => {
      if (!this.relaying) this.end(callerLeft());
    });
  }

  end(error: ProxyError): void {
    this.error ??= error;
    this.abort.abort(this.error);
  }
}
