import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { contextEntries, openBuildContext } from './build-context.ts';
import { findStage, parseDockerfile, parseDockerfileText } from './dockerfile.ts';
import { runSteps, stageConfig } from './image-build.ts';

const ROOT = join(import.meta.dirname, '..', '..', '..');

describe('the project Dockerfile, as the node images read it', () => {
  const df = parseDockerfile(join(ROOT, 'Dockerfile'));

  it('gives the sidecar target the entry point, user, environment and working directory users get', () => {
    expect(stageConfig(df, findStage(df, 'sidecar'))).toMatchObject({
      entrypoint: ['node', '--no-maglev', 'cmd/tollgate.js'],
      cmd: ['proxy'],
      user: '65532:65532',
      workingDir: '/app',
      env: { NODE_ENV: 'production', NODE_OPTIONS: '--max-semi-space-size=2 --max-old-space-size=64 --v8-pool-size=1', MALLOC_MMAP_THRESHOLD_: '32768' },
    });
  });

  it('gives the tollgate target the same entry point and user, and --help by default', () => {
    const config = stageConfig(df, findStage(df, 'tollgate'));
    expect(config).toMatchObject({ entrypoint: ['node', 'cmd/tollgate.js'], cmd: ['--help'], user: '65532:65532', workingDir: '/app' });
    expect(config.env.NODE_OPTIONS).toBeUndefined();
  });

  it('resolves FROM ${NODE_IMAGE} through the global ARG, and a --build-arg overrides it', () => {
    expect(findStage(df, 'build').from).toBe('node:24-bookworm-slim');
    expect(findStage(parseDockerfile(join(ROOT, 'Dockerfile'), { NODE_IMAGE: 'node:22-slim' }), 'build').from).toBe('node:22-slim');
  });
});

describe('Dockerfile parsing', () => {
  const parse = (text: string) => parseDockerfileText(text, 'Test.Dockerfile');

  it('joins continued lines, skips comments inside them and reads quoted ENV values', () => {
    const df = parse('FROM scratch\nENV A="one two" \\\n# a comment\n    B=3\nENV LEGACY value with spaces\n');
    expect(stageConfig(df, df.stages[0]!).env).toEqual({ A: 'one two', B: '3', LEGACY: 'value with spaces' });
  });

  it('keeps a stage ARG out of the image environment but expands it', () => {
    const df = parse('FROM scratch\nARG DIR=/srv\nWORKDIR ${DIR}/app\n');
    const config = stageConfig(df, df.stages[0]!);
    expect(config.workingDir).toBe('/srv/app');
    expect(config.env).toEqual({});
  });

  it.each([
    ['ADD app.tar /', 'Test.Dockerfile:2: ADD is not supported by the image assembler'],
    ['ENTRYPOINT node cli.js', 'Test.Dockerfile:2: ENTRYPOINT must use the exec form'],
    ['COPY src/*.ts /app/', 'Test.Dockerfile:2: COPY source "src/*.ts": wildcards are not supported'],
    ['COPY --chown=1:1 a /a', 'Test.Dockerfile:2: COPY --chown is not supported'],
  ])('refuses %j, naming the line', (line, message) => {
    expect(() => parse(`FROM scratch\n${line}\n`)).toThrow(message);
  });

  it('refuses a FROM image it cannot provide', () => {
    const df = parse('FROM debian:12\nUSER 1\n');
    expect(() => stageConfig(df, df.stages[0]!)).toThrow('Test.Dockerfile:1: FROM debian:12: the image assembler provides node:<major> bases and scratch only');
  });

  it('runs only npm and npx commands chained with &&', () => {
    expect(runSteps('D:3', 'npm ci --omit=dev \\n && npm cache clean --force'.replace('\\n', ''))).toEqual(['npm ci --omit=dev', 'npm cache clean --force']);
    expect(() => runSteps('D:3', 'npm ci && rm -rf /')).toThrow('D:3: RUN supports npm and npx commands only (got "rm -rf /")');
    expect(() => runSteps('D:3', 'npm ci; touch /x')).toThrow('D:3: RUN may only chain commands with &&');
  });
});

describe('build context', () => {
  let dir: string;
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('honours .dockerignore as Docker does: root-anchored patterns, ** at any depth, folders as a whole, ! exceptions', () => {
    dir = mkdtempSync(join(tmpdir(), 'tollgate-context-'));
    for (const file of ['src/a.ts', 'src/a.test.ts', 'src/deep/b.test.ts', 'src/deep/b.ts', 'test/x.ts', 'keep.db', 'src/keep.db', 'docs/keep.md', 'docs/other.md']) {
      mkdirSync(join(dir, file, '..'), { recursive: true });
      writeFileSync(join(dir, file), file);
    }
    writeFileSync(join(dir, 'Dockerfile'), 'FROM scratch\n');
    writeFileSync(join(dir, '.dockerignore'), '**/*.test.ts\ntest\n*.db\ndocs\n!docs/keep.md\n');
    const ctx = openBuildContext(dir, join(dir, 'Dockerfile'));
    expect(contextEntries(ctx, 'src')).toEqual(['src/a.ts', 'src/deep/b.ts', 'src/keep.db']);
    expect(contextEntries(ctx, '.').filter((p) => !p.startsWith('src/'))).toEqual(['.dockerignore', 'Dockerfile', 'docs/keep.md']);
    expect(() => contextEntries(ctx, 'test')).toThrow('COPY source "test" is excluded by');
  });

  it('prefers <Dockerfile>.dockerignore beside the Dockerfile to the context one', () => {
    dir = mkdtempSync(join(tmpdir(), 'tollgate-context-'));
    mkdirSync(join(dir, 'test'));
    writeFileSync(join(dir, 'test', 'fake.ts'), '');
    writeFileSync(join(dir, '.dockerignore'), 'test\n');
    writeFileSync(join(dir, 'tools.Dockerfile'), 'FROM scratch\n');
    writeFileSync(join(dir, 'tools.Dockerfile.dockerignore'), '*.db\n');
    expect(contextEntries(openBuildContext(dir, join(dir, 'tools.Dockerfile')), 'test')).toEqual(['test/fake.ts']);
  });
});
