// What a span says about a process's arguments (provenance.arguments, ADR 1600): by default nothing beyond the
// binary, since an agent's command line can hold a key or a prompt; `redacted` replaces every match of the
// configured patterns; `all` keeps them as they were.

import type { ProvenanceArguments } from '../../../contracts/provenance-config.ts';

/** Tetragon's `arguments`: argv[1:] joined by spaces, an argument holding spaces wrapped in double quotes. */
export function splitTetragonArguments(text: string): string[] {
  const out: string[] = [];
  for (const match of text.matchAll(/"([^"]*)"|(\S+)/g)) out.push(match[1] ?? match[2]!);
  return out;
}

export class ArgumentPolicy {
  readonly #mode: ProvenanceArguments;
  readonly #patterns: RegExp[];

  constructor(mode: ProvenanceArguments, patterns: readonly string[]) {
    this.#mode = mode;
    this.#patterns = patterns.map((p) => new RegExp(p, 'gi'));
  }

  /** argv with argv[0] (the binary) per the policy, or null when arguments are not recorded. */
  commandArgs(binary: string, args: readonly string[]): string[] | null {
    if (this.#mode === 'none') return null;
    if (this.#mode === 'all') return [binary, ...args];
    return [binary, ...args.map((arg) => this.#patterns.reduce((text, pattern) => text.replace(pattern, '[redacted]'), arg))];
  }
}
