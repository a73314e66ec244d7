// Golden files: webhook/testdata/<case>.input.json (a pod and its namespace) → <case>.golden.json (the
// decision: patch, skip reason or refusal). UPDATE_GOLDEN=1 rewrites the golden files; review the diff.
// Beyond the golden comparison, every patch is applied to its input pod (a patch that is invalid against the
// object as received throws), and the patched pod must then be left alone: reinvocation changes nothing.

import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { planInjection, type InjectionInput } from './inject.ts';
import type { SidecarDefaults } from './sidecar-settings.ts';
import { applyPatch } from '../testdata/apply-patch.ts';
import { TEST_DEFAULTS } from '../testdata/sidecar-defaults.ts';

const TESTDATA = join(import.meta.dirname, '..', 'testdata');
const UPDATE = process.env.UPDATE_GOLDEN === '1';

const OPERATOR_CA = '-----BEGIN CERTIFICATE-----\nMIIBtestCA\n-----END CERTIFICATE-----\n';

interface CaseFile {
  namespace?: string;
  namespaceLabels?: Record<string, string>;
  nativeSidecarSupported?: boolean;
  defaults?: Partial<SidecarDefaults>;
  /** The pod's ProxyConfig enables audit (and the chart's audit.hostSocket, when hostSocketDir is set). */
  audit?: InjectionInput['audit'];
  pod: V1Pod;
}

function inputFor(c: CaseFile, pod: V1Pod = c.pod): InjectionInput {
  return {
    pod,
    namespace: c.namespace ?? 'shop',
    namespaceLabels: c.namespaceLabels ?? {},
    ownNamespace: 'tollgate-system',
    defaults: { ...TEST_DEFAULTS, ...c.defaults },
    nativeSidecarSupported: c.nativeSidecarSupported ?? true,
    operatorCaPem: OPERATOR_CA,
    ...(c.audit ? { audit: c.audit } : {}),
  };
}

const cases = readdirSync(TESTDATA)
  .filter((f) => f.endsWith('.input.json'))
  .map((f) => f.slice(0, -'.input.json'.length))
  .sort();

describe('injection patch golden files', () => {
  it('has the representative cases', () => {
    for (const required of [
      'plain-namespace-label',
      'several-containers',
      'already-injected-status',
      'opted-out',
      'native-override-false',
      'plain-annotation-classic',
      'bad-cpu',
      'inject-env-fresh',
      'inject-env-already-set',
    ]) {
      expect(cases).toContain(required);
    }
  });

  for (const name of cases) {
    it(name, () => {
      const c = JSON.parse(readFileSync(join(TESTDATA, `${name}.input.json`), 'utf8')) as CaseFile;
      const decision = planInjection(inputFor(c));
      const goldenPath = join(TESTDATA, `${name}.golden.json`);
      if (UPDATE || !existsSync(goldenPath)) writeFileSync(goldenPath, JSON.stringify(decision, null, 2) + '\n');
      expect(JSON.parse(JSON.stringify(decision))).toEqual(JSON.parse(readFileSync(goldenPath, 'utf8')));

      if (decision.kind === 'inject') {
        const patched = applyPatch(c.pod, decision.patch);
        expect(planInjection(inputFor(c, patched))).toMatchObject({ kind: 'skip', skip: { reason: 'AlreadyInjected' } });
      }
    });
  }
});

describe('injection behaviour', () => {
  const base: CaseFile = { namespaceLabels: { 'tollgate.dev/injection': 'enabled' }, pod: { metadata: {}, spec: { containers: [{ name: 'app' }] } } };

  it('escapes / in annotation keys when annotations already exist', () => {
    const decision = planInjection(inputFor(base, { metadata: { annotations: { a: 'b' } }, spec: { containers: [{ name: 'app' }] } }));
    expect(decision.kind).toBe('inject');
    const paths = decision.kind === 'inject' ? decision.patch.map((p) => p.path) : [];
    expect(paths).toContain('/metadata/annotations/tollgate.dev~1status');
    expect(paths).toContain('/metadata/annotations/tollgate.dev~1operator-ca');
  });

  it('never overwrites a variable the container sets, and names envFrom containers in its notes', () => {
    const pod: V1Pod = {
      metadata: { annotations: { 'tollgate.dev/inject-env': 'true' } },
      spec: {
        containers: [
          { name: 'a', env: [{ name: 'ANTHROPIC_BASE_URL', value: 'keep-me' }] },
          { name: 'b', envFrom: [{ secretRef: { name: 's' } }] },
        ],
      },
    };
    const decision = planInjection(inputFor(base, pod));
    if (decision.kind !== 'inject') throw new Error(decision.kind);
    const patched = applyPatch(pod, decision.patch);
    const env = patched.spec!.containers[0]!.env!;
    expect(env.filter((e) => e.name === 'ANTHROPIC_BASE_URL')).toEqual([{ name: 'ANTHROPIC_BASE_URL', value: 'keep-me' }]);
    expect(env.find((e) => e.name === 'OPENAI_BASE_URL')?.value).toBe('http://127.0.0.1:8181/proxy/beta/v1');
    expect(patched.spec!.containers[1]!.env).toBeUndefined();
    expect(decision.notes).toEqual(['container b uses envFrom: SDK base-URL variables not added']);
  });

  it('refuses with a message naming each bad annotation', () => {
    const pod: V1Pod = { metadata: { annotations: { 'tollgate.dev/sidecar-memory': 'big', 'tollgate.dev/sidecar-port': '70000' } }, spec: { containers: [{ name: 'app' }] } };
    const decision = planInjection(inputFor(base, pod));
    expect(decision.kind).toBe('refuse');
    if (decision.kind !== 'refuse') return;
    expect(decision.message).toContain('tollgate.dev/sidecar-memory');
    expect(decision.message).toContain('tollgate.dev/sidecar-port');
  });
});
