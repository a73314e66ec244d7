// The cache outside the repository that tollgatew and test/control-plane/build.sh use too.

import { homedir } from 'node:os';
import { join } from 'node:path';

export function tollgateCache(...parts: string[]): string {
  const root = process.env.TOLLGATE_CACHE || join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'tollgate');
  return join(root, ...parts);
}
