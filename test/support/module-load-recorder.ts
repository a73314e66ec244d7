// Preloaded into a child process (`node --import <this file>`), it records every module the process loads, its
// own and its dependencies', ESM and CommonJS alike, and writes their URLs one a line to the file named by
// TOLLGATE_LOADED_MODULES_FILE when the process exits. Tests use it to hold ADR 0003: a process loads only what
// its config uses.

import { registerHooks } from 'node:module';
import { writeFileSync } from 'node:fs';

const file = process.env.TOLLGATE_LOADED_MODULES_FILE;
if (!file) throw new Error('module-load-recorder: set TOLLGATE_LOADED_MODULES_FILE to the file the list goes to');

const loaded = new Set<string>();
registerHooks({
  load(url, context, nextLoad) {
    loaded.add(url);
    return nextLoad(url, context);
  },
});
process.on('exit', () => writeFileSync(file, [...loaded].join('\n') + '\n'));
