// Reads a Dockerfile into stages and the image config a target ends with, so the benchmarks start the sidecar
// with the very flags (NODE_OPTIONS, the ENTRYPOINT's node flags) users' `docker build` gives its image, without
// a container engine. Only the instructions Tollgate's Dockerfiles use are accepted; anything else is an error
// that names the line, never silently skipped. The kind tests check the built image itself (test/kind).

import { readFileSync } from 'node:fs';
import { posix } from 'node:path';

export type Instruction =
  | { kind: 'ARG'; line: number; name: string; value: string }
  | { kind: 'WORKDIR'; line: number; path: string }
  | { kind: 'ENV'; line: number; vars: Array<[string, string]> }
  | { kind: 'COPY'; line: number; from?: string; sources: string[]; dest: string }
  | { kind: 'RUN'; line: number; command: string }
  | { kind: 'USER'; line: number; user: string }
  | { kind: 'ENTRYPOINT'; line: number; argv: string[] }
  | { kind: 'CMD'; line: number; argv: string[] }
  | { kind: 'EXPOSE'; line: number; ports: string[] }
  | { kind: 'LABEL'; line: number; labels: Array<[string, string]> };

export interface Stage {
  /** The name after AS, else the stage's index as a string (as `--from=0` refers to it). */
  name: string;
  index: number;
  /** The FROM image after ARG substitution: an image reference or the name of an earlier stage. */
  from: string;
  line: number;
  instructions: Instruction[];
}

export interface Dockerfile {
  path: string;
  /** ARGs declared before the first FROM, with their defaults after --build-arg overrides. */
  globalArgs: Record<string, string>;
  stages: Stage[];
}

export class DockerfileError extends Error {
  constructor(path: string, line: number, message: string) {
    super(`${path}:${line}: ${message}`);
    this.name = 'DockerfileError';
  }
}

interface LogicalLine {
  line: number;
  text: string;
}

// Joins backslash continuations; comment lines inside a continuation are dropped, as Docker does.
function logicalLines(source: string): LogicalLine[] {
  const out: LogicalLine[] = [];
  let pending: LogicalLine | undefined;
  source.split('\n').forEach((raw, i) => {
    const text = raw.replace(/\r$/, '');
    const trimmed = text.trim();
    if (trimmed.startsWith('#')) return;
    if (pending === undefined) {
      if (trimmed === '') return;
      pending = { line: i + 1, text: '' };
    }
    if (text.endsWith('\\')) {
      pending.text += `${text.slice(0, -1)} `;
      return;
    }
    pending.text += text;
    out.push({ line: pending.line, text: pending.text.trim() });
    pending = undefined;
  });
  if (pending !== undefined) out.push({ line: pending.line, text: pending.text.trim() });
  return out;
}

/** Splits shell-like words: whitespace separates, "…" and '…' group, a backslash escapes the next character. */
export function shellWords(text: string): string[] {
  const words: string[] = [];
  let current = '';
  let inWord = false;
  let quote: '"' | "'" | undefined;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quote !== undefined) {
      if (c === quote) quote = undefined;
      else if (c === '\\' && quote === '"' && i + 1 < text.length) current += text[++i];
      else current += c;
    } else if (c === '"' || c === "'") {
      quote = c;
      inWord = true;
    } else if (c === '\\' && i + 1 < text.length) {
      current += text[++i];
      inWord = true;
    } else if (/\s/.test(c)) {
      if (inWord) words.push(current);
      current = '';
      inWord = false;
    } else {
      current += c;
      inWord = true;
    }
  }
  if (quote !== undefined) throw new Error(`unterminated ${quote} quote`);
  if (inWord) words.push(current);
  return words;
}

/** $NAME and ${NAME} from vars; an unknown name expands to the empty string, as in Docker. */
export function expandVariables(text: string, vars: Record<string, string>): string {
  return text.replace(/\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))/g, (_m, braced?: string, bare?: string) => vars[(braced ?? bare)!] ?? '');
}

function keyValues(words: string[], what: string): Array<[string, string]> {
  // The legacy form `ENV KEY value with spaces` has a single key and no `=`.
  if (words.length >= 2 && !words[0]!.includes('=')) return [[words[0]!, words.slice(1).join(' ')]];
  return words.map((word) => {
    const eq = word.indexOf('=');
    if (eq <= 0) throw new Error(`${what} expects KEY=value pairs (got ${JSON.stringify(word)})`);
    return [word.slice(0, eq), word.slice(eq + 1)];
  });
}

function execForm(args: string, keyword: string): string[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(args);
  } catch {
    // The shell form needs /bin/sh, which the minimal base does not have.
    throw new Error(`${keyword} must use the exec form, a JSON array of strings (got ${JSON.stringify(args)})`);
  }
  if (!Array.isArray(parsed) || parsed.length === 0 || !parsed.every((a) => typeof a === 'string')) {
    throw new Error(`${keyword} must be a non-empty JSON array of strings`);
  }
  return parsed;
}

export function parseDockerfile(path: string, buildArgs: Record<string, string> = {}): Dockerfile {
  return parseDockerfileText(readFileSync(path, 'utf8'), path, buildArgs);
}

export function parseDockerfileText(source: string, path: string, buildArgs: Record<string, string> = {}): Dockerfile {
  const globalArgs: Record<string, string> = {};
  const stages: Stage[] = [];
  for (const { line, text } of logicalLines(source)) {
    const match = /^(\S+)\s*(.*)$/s.exec(text)!;
    const keyword = match[1]!.toUpperCase();
    const args = match[2]!;
    const fail = (message: string): never => {
      throw new DockerfileError(path, line, message);
    };
    try {
      const stage = stages.at(-1);
      // Variables visible on this line: the stage's ARGs and ENVs so far (build args win over defaults).
      const stageVars = stage === undefined ? { ...globalArgs } : stageVariables(stage);
      if (keyword === 'ARG') {
        const [name, defaultValue] = args.split(/=(.*)/s);
        if (!name || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) fail(`ARG needs a name (got ${JSON.stringify(args)})`);
        const value = buildArgs[name!] ?? (defaultValue !== undefined ? expandVariables(defaultValue, stageVars) : (globalArgs[name!] ?? ''));
        if (stage === undefined) globalArgs[name!] = value;
        else stage.instructions.push({ kind: 'ARG', line, name: name!, value });
        continue;
      }
      if (keyword === 'FROM') {
        const words = shellWords(args);
        if (words.some((w) => w.startsWith('--'))) fail('FROM --platform is not supported');
        if (!(words.length === 1 || (words.length === 3 && words[1]!.toUpperCase() === 'AS'))) fail(`FROM expects IMAGE [AS NAME] (got ${JSON.stringify(args)})`);
        stages.push({ name: words[2] ?? String(stages.length), index: stages.length, from: expandVariables(words[0]!, globalArgs), line, instructions: [] });
        continue;
      }
      if (stage === undefined) fail(`${keyword} before the first FROM`);
      const push = (i: Instruction) => stage!.instructions.push(i);
      switch (keyword) {
        case 'WORKDIR':
          push({ kind: 'WORKDIR', line, path: expandVariables(args, stageVars) });
          break;
        case 'ENV':
          push({ kind: 'ENV', line, vars: keyValues(shellWords(expandVariables(args, stageVars)), 'ENV') });
          break;
        case 'LABEL':
          push({ kind: 'LABEL', line, labels: keyValues(shellWords(expandVariables(args, stageVars)), 'LABEL') });
          break;
        case 'COPY': {
          const words = args.trimStart().startsWith('[') ? execForm(args, 'COPY') : shellWords(expandVariables(args, stageVars));
          let from: string | undefined;
          while (words[0]?.startsWith('--')) {
            const flag = words.shift()!;
            if (flag.startsWith('--from=')) from = flag.slice('--from='.length);
            else fail(`COPY ${flag.split('=')[0]} is not supported by the Dockerfile reader`);
          }
          if (words.length < 2) fail('COPY needs at least one source and a destination');
          const sources = words.slice(0, -1);
          for (const s of sources) if (/[*?[]/.test(s)) fail(`COPY source ${JSON.stringify(s)}: wildcards are not supported by the Dockerfile reader`);
          push({ kind: 'COPY', line, ...(from !== undefined ? { from } : {}), sources, dest: words.at(-1)! });
          break;
        }
        case 'RUN':
          if (args.trimStart().startsWith('[')) fail('RUN in exec form is not supported by the Dockerfile reader');
          push({ kind: 'RUN', line, command: args });
          break;
        case 'USER':
          push({ kind: 'USER', line, user: expandVariables(args.trim(), stageVars) });
          break;
        case 'ENTRYPOINT':
        case 'CMD':
          push({ kind: keyword, line, argv: execForm(args, keyword) });
          break;
        case 'EXPOSE':
          push({ kind: 'EXPOSE', line, ports: shellWords(expandVariables(args, stageVars)).map((p) => (p.includes('/') ? p : `${p}/tcp`)) });
          break;
        default:
          fail(`${keyword} is not supported by the Dockerfile reader (bench/dockerfile.ts); supported: ARG FROM WORKDIR ENV LABEL COPY RUN USER ENTRYPOINT CMD EXPOSE`);
      }
    } catch (err) {
      if (err instanceof DockerfileError) throw err;
      throw new DockerfileError(path, line, err instanceof Error ? err.message : String(err));
    }
  }
  if (stages.length === 0) throw new DockerfileError(path, 1, 'no FROM instruction');
  return { path, globalArgs, stages };
}

/**
 * The variables a stage's instructions see after its `upTo` first instructions: the ARGs declared in the stage
 * (a global ARG is visible in a stage only when redeclared there, as in Docker) and its ENV values.
 */
export function stageVariables(stage: Stage, upTo = stage.instructions.length): Record<string, string> {
  const vars: Record<string, string> = {};
  for (const i of stage.instructions.slice(0, upTo)) {
    if (i.kind === 'ENV') for (const [k, v] of i.vars) vars[k] = v;
    if (i.kind === 'ARG') vars[i.name] = i.value;
  }
  return vars;
}

export function findStage(dockerfile: Dockerfile, name: string): Stage {
  const stage = dockerfile.stages.find((s) => s.name === name);
  if (stage === undefined) {
    throw new Error(`${dockerfile.path}: no stage named ${JSON.stringify(name)} (stages: ${dockerfile.stages.map((s) => s.name).join(', ')})`);
  }
  return stage;
}

/** The config an image built from a stage ends with, as far as the Dockerfile says (a base image's own is not read). */
export interface ImageConfig {
  env: Record<string, string>;
  entrypoint?: string[];
  cmd?: string[];
  workingDir: string;
  user: string;
}

/** WORKDIR, ENV, USER, ENTRYPOINT and CMD applied in order through the stage's chain of FROMs, as Docker applies them. */
export function stageConfig(df: Dockerfile, stage: Stage): ImageConfig {
  const parentStage = df.stages.find((s) => s.name === stage.from && s.index < stage.index);
  const config: ImageConfig = parentStage ? structuredClone(stageConfig(df, parentStage)) : { env: {}, workingDir: '/', user: '' };
  for (const i of stage.instructions) {
    if (i.kind === 'WORKDIR') config.workingDir = posix.resolve(config.workingDir, i.path);
    else if (i.kind === 'ENV') for (const [k, v] of i.vars) config.env[k] = v;
    else if (i.kind === 'USER') config.user = i.user;
    else if (i.kind === 'ENTRYPOINT') {
      config.entrypoint = i.argv;
      delete config.cmd; // Docker drops an inherited CMD when ENTRYPOINT is set
    } else if (i.kind === 'CMD') config.cmd = i.argv;
  }
  return config;
}
