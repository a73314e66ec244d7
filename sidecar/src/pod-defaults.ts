// Defaults that depend on where the engine runs: in a pod (the webhook's environment, contracts/sidecar-env.ts)
// and in server mode some settings differ from the developer's local proxy unless the config file says
// otherwise. Shared by `tollgate proxy` and `tollgate spend`, which must find the spans where the proxy put them.

import { join } from 'node:path';
import type { RuntimeConfigPatch } from '../../contracts/config-schema.ts';
import { PROXY_ENV } from '../../contracts/sidecar-env.ts';

/** Spans kept by a sidecar when nothing says otherwise: enough to answer "what did this pod just spend". */
const POD_MAX_SPANS = 20_000;

/**
 * The local runtime's features (its models on /v1, the LM Studio-compatible port, /_local/api/start) are the
 * developer's: off in a pod and in server mode unless the config file turns them on.
 */
export function applyLocalDefaults(patch: RuntimeConfigPatch, env: NodeJS.ProcessEnv): void {
  if (patch.local?.enabled !== undefined) return;
  if (env[PROXY_ENV.stateDir] || env[PROXY_ENV.operatorAddress] || patch.mode === 'server') patch.local = { ...patch.local, enabled: false };
}

/**
 * In a pod (the state directory set by the webhook) the root filesystem is read-only and the state volume is
 * small: the span file goes to the state directory and keeps only the newest spans, unless the config file
 * says otherwise. The operator's snapshot, applied later, can still set both.
 */
export function applyPodDefaults(patch: RuntimeConfigPatch, env: NodeJS.ProcessEnv): void {
  const stateDir = env[PROXY_ENV.stateDir];
  if (!stateDir) return;
  patch.storage = {
    path: join(stateDir, 'spans.db'),
    maxSpans: POD_MAX_SPANS,
    ...patch.storage,
  };
}
