// The GatewayError a translation refuses a request with, for the tests that check what it names.

import { GatewayError } from '../openai-error.ts';

export function refusal(run: () => unknown): GatewayError {
  try {
    run();
  } catch (error) {
    if (error instanceof GatewayError) return error;
    throw error;
  }
  throw new Error('expected a GatewayError');
}
