import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { findStage, parseDockerfile, parseDockerfileText, stageConfig } from '../../bench/dockerfile.ts';

const ROOT = join(import.meta.dirname, '..', '..');

describe('the project Dockerfile, as the benchmarks read it', () => {
  const df = parseDockerfile(join(ROOT, 'Dockerfile'));

  it('gives the sidecar target the entry point, user, environment and working directory users get', () => {
    expect(stageConfig(df, findStage(df, 'sidecar'))).toMatchObject({
      entrypoint: ['node', '--no-maglev', '--no-page-promotion', 'cmd/tollgate.js'],
      cmd: ['proxy'],
      user: '65532:65532',
      workingDir: '/app',
      env: { NODE_ENV: 'production', NODE_OPTIONS: '--max-semi-space-size=4 --max-old-space-size=64 --v8-pool-size=1', MALLOC_MMAP_THRESHOLD_: '32768' },
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
    ['ADD app.tar /', 'Test.Dockerfile:2: ADD is not supported by the Dockerfile reader'],
    ['ENTRYPOINT node cli.js', 'Test.Dockerfile:2: ENTRYPOINT must use the exec form'],
    ['COPY src/*.ts /app/', 'Test.Dockerfile:2: COPY source "src/*.ts": wildcards are not supported'],
    ['COPY --chown=1:1 a /a', 'Test.Dockerfile:2: COPY --chown is not supported'],
  ])('refuses %j, naming the line', (line, message) => {
    expect(() => parse(`FROM scratch\n${line}\n`)).toThrow(message);
  });
});
