#!/usr/bin/env node
// The one `tollgate` command. Each subcommand lives in its component and is loaded only when asked for,
// so `tollgate proxy` never loads the Kubernetes client, and each image ships only its components (the
// Dockerfile says which): a command whose component an image leaves out says so instead of a stack trace.

const USAGE = `usage: tollgate <command> [options]

commands:
  proxy      run the LLM proxy (local proxy, sidecar or central server)   tollgate proxy --help
  spend      spend per user, model, project or provider from the span store  tollgate spend --help
  trail      what a call's process tree did after the answer (a running proxy's causal trail)  tollgate trail --help
  operator   run the operator (ProxyConfig reconciler and config push)    tollgate operator --help
  webhook    run the sidecar injection webhook                            tollgate webhook --help
  selftest   check injection, config push and metering from an injected pod (the chart's hooks and helm test)
  crds       print the CustomResourceDefinitions (tollgate crds | kubectl apply -f -)
`;

class MissingComponent extends Error {}

async function load<T>(command: string, importer: () => Promise<T>): Promise<T> {
  try {
    return await importer();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ERR_MODULE_NOT_FOUND') throw error;
    throw new MissingComponent(`\`tollgate ${command}\` is not part of this image (the Dockerfile says what each image holds): ${(error as Error).message}`);
  }
}

async function run(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case 'proxy':
      return (await load(command, () => import('../sidecar/src/main.ts'))).main(rest);
    case 'spend':
      return (await load(command, () => import('../sidecar/src/spend-cli.ts'))).main(rest);
    case 'trail':
      return (await load(command, () => import('../sidecar/src/trail-cli.ts'))).main(rest);
    case 'operator':
      return (await load(command, () => import('../operator/src/main.ts'))).main(rest);
    case 'webhook':
      return (await load(command, () => import('../webhook/src/main.ts'))).main(rest);
    case 'selftest':
      return (await load(command, () => import('../webhook/src/selftest/main.ts'))).main(rest);
    case 'crds':
      process.stdout.write((await load(command, () => import('../crds/index.ts'))).crdManifests());
      return 0;
    case undefined:
    case '-h':
    case '--help':
    case 'help':
      process.stdout.write(USAGE);
      return command === undefined ? 2 : 0;
    default:
      process.stderr.write(`tollgate: unknown command ${JSON.stringify(command)}\n\n${USAGE}`);
      return 2;
  }
}

run(process.argv.slice(2)).then(
  (code) => {
    // Servers resolve only once they have shut down; a non-zero code is a start-up or usage error.
    if (code !== 0) process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`tollgate: ${error instanceof MissingComponent ? error.message : error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  },
);
