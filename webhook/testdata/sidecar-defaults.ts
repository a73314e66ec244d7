// The chart defaults the golden files and unit tests are rendered with.

import type { SidecarDefaults } from '../src/sidecar-settings.ts';

export const TEST_DEFAULTS: SidecarDefaults = {
  image: 'ghcr.io/tollgate/sidecar:0.1.0',
  version: '0.1.0',
  port: 8181,
  resources: { requests: { cpu: '50m', memory: '64Mi' }, limits: { cpu: '1', memory: '256Mi' } },
  nativeSidecar: 'auto',
  operatorAddress: 'tollgate-operator.tollgate-system.svc:9443',
  logLevel: 'info',
};
