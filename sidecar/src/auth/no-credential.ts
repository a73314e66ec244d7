// The credential of an upstream that takes none: a model runtime on the developer's own machine (route
// `local`). The caller's own credentials are still stripped (http/proxy-headers.ts); nothing is added.

import type { CredentialProvider } from './credential-provider.ts';

export function createNoCredentialProvider(id = 'none'): CredentialProvider {
  return {
    kind: id,
    apply: async () => undefined,
    problem: () => null,
    close: () => undefined,
  };
}
