// Lint: typescript-eslint with type information (ADR 1202). Type-aware rules catch what tsc does not: a
// promise nobody awaits, a promise where a callback's return is ignored, an `any` leaking out of JSON.
// The import boundaries keep each component to its own tree plus contracts/ and kube-client/ (ADR 1200).
import tseslint from 'typescript-eslint';

/** An import that climbs out of the file's own tree into one of these top-level folders. */
const into = (folders) => ({
  regex: `^(\\.\\./)+(${folders.join('|')})/`,
  message: "components share code through contracts/ (and kube-client/ for Kubernetes plumbing), never each other's internals (ADR 1200)",
});
const SLEEP = 'a test does not sleep: wait for the event with waitFor (test/support/wait-for.ts), or use fake timers';
/** The code that ships; tests, fakes and benchmarks are not held to the function-size rules. */
const PRODUCTION = ['contracts/**/*.ts', 'cmd/**/*.ts', 'crds/**/*.ts', 'kube-client/**/*.ts', 'operator/**/*.ts', 'sidecar/src/**/*.ts', 'webhook/**/*.ts'];
const restrict = (files, ignores, folders) => ({
  files,
  ignores,
  rules: { '@typescript-eslint/no-restricted-imports': ['error', { patterns: [into(folders)] }] },
});
/** What each folder may not import; production code never reaches into the tests' fakes and harnesses either. */
const boundary = (folder, ...forbidden) => [
  restrict([`${folder}/**/*.ts`], [`${folder}/**/*.test.ts`], [...forbidden, 'test', 'bench']),
  restrict([`${folder}/**/*.test.ts`], [], forbidden),
];

export default tseslint.config(
  { ignores: ['node_modules/**', 'dist/**', 'crds/generated/**', 'contracts/generated/**', 'eslint.config.js'] },
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      '@typescript-eslint/max-params': ['error', { max: 5 }],
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      // fastify plugins and interface methods are async by contract, awaiting or not (ADR 1202)
      '@typescript-eslint/require-await': 'off',
      // a variable a closure reads before its one assignment cannot be a const, nor one destructured beside a reassigned one
      'prefer-const': ['error', { ignoreReadBeforeAssign: true, destructuring: 'all' }],
      // `_`-prefixed names and rest siblings say "deliberately unused" (an ignored callback argument, a field left out)
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', ignoreRestSiblings: true }],
    },
  },
  {
    // Tests assert on parsed JSON and with vitest's asymmetric matchers, both typed `any` on purpose, and
    // build deliberately invalid resources; the any rules guard production code, where they stay on.
    files: ['**/*.test.ts', 'test/**/*.ts'],
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
    },
  },
  {
    // No fixed sleeps in tests (CONTRIBUTING): wait for the event with test/support/wait-for.ts, or fake the clock.
    files: ['**/*.test.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        // new Promise((resolve) => setTimeout(resolve, ms)); a deadline that rejects is not a sleep
        { selector: "NewExpression[callee.name='Promise'] CallExpression[callee.name='setTimeout'][arguments.0.type='Identifier']", message: SLEEP },
        { selector: "ImportDeclaration[source.value='node:timers/promises'] > ImportSpecifier[imported.name='setTimeout']", message: SLEEP },
      ],
    },
  },
  {
    // The management UI's browser script (no build step, no types): the syntax and the non-type rules only.
    files: ['sidecar/ui/**/*.js'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: { sourceType: 'module', parserOptions: { projectService: false } },
  },
  {
    // Small functions (ADR 1205): a builder that returns closures over a dozen pieces of state is an object;
    // split it along its concerns (controller-runtime's one reconciler per kind is the model). Production
    // code only: a test's describe block is a list of cases, not a function that grew.
    files: PRODUCTION,
    ignores: ['**/*.test.ts'],
    rules: {
      'max-lines-per-function': ['error', { max: 100, skipBlankLines: true, skipComments: true }],
      'max-statements': ['error', 40],
      complexity: ['error', 30],
    },
  },
  {
    // The exceptions, each for its reason (ADR 1205).
    // Declarations, not logic: a CRD schema literal and the list of metric series.
    files: ['crds/proxy-config-audit.ts', 'sidecar/src/metrics/proxy-metrics.ts'],
    rules: { 'max-lines-per-function': 'off' },
  },
  // None on the request path: the translators, the gateway's handler and the JSON array reader were split (ADR 1700).
  // contracts/ is the bottom layer: crds/ builds the Kubernetes API on it, never the reverse (ADR 1204).
  ...boundary('contracts', 'cmd', 'sidecar', 'operator', 'webhook', 'kube-client', 'crds'),
  ...boundary('crds', 'cmd', 'sidecar', 'operator', 'webhook', 'kube-client'),
  ...boundary('kube-client', 'cmd', 'sidecar', 'operator', 'webhook', 'crds'),
  ...boundary('sidecar', 'cmd', 'operator', 'webhook', 'kube-client', 'crds'),
  ...boundary('operator', 'cmd', 'sidecar', 'webhook'),
  ...boundary('webhook', 'cmd', 'sidecar', 'operator'),
  {
    // What the webhook tells the sidecar (environment variable names, mounted paths) is one contract, in
    // contracts/sidecar-env.ts; a literal on either side is a mismatch nothing would see (ADR 1204).
    files: ['sidecar/src/**/*.ts', 'webhook/src/**/*.ts'],
    ignores: ['**/*.test.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        { selector: 'Literal[value=/^TOLLGATE_[A-Z_]+$/]', message: 'name the variable through PROXY_ENV (contracts/sidecar-env.ts), which the webhook and the proxy share' },
        {
          selector: 'MemberExpression[property.name=/^TOLLGATE_/]',
          message: 'read the variable as env[PROXY_ENV.…] (contracts/sidecar-env.ts), which the webhook and the proxy share',
        },
        { selector: 'Literal[value=/^\\/var\\/run\\/(secrets\\/)?tollgate/]', message: "the sidecar's mounted paths are in contracts/sidecar-env.ts" },
      ],
    },
  },
);
