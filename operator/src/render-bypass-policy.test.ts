// The bypass policy against the shapes of Tetragon's own examples (the tcp_connect sketch and the
// security_socket_connect Override example), written out here as YAML by hand.

import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { renderBypassPolicy, type BypassPolicyInput } from './render-bypass-policy.ts';

const INPUT: BypassPolicyInput = {
  proxyConfig: { name: 'default', namespace: 'team-a', uid: '0d8f5b8e-1111-4222-8333-444455556666' },
  mode: 'audit',
  action: 'sigkill',
  sidecarContainer: 'tollgate-proxy',
  // Resolved api.openai.com twice (one address repeated), an IPv6 address, loopback (the local runtime) and a CIDR.
  addresses: ['162.159.140.245', '172.66.0.243', '162.159.140.245', '2606:4700:3108::ac42:2af3', '127.0.0.1', '::1', '10.20.0.0/16'],
  ports: [443, 8080, 443],
};

const METADATA = `
apiVersion: cilium.io/v1alpha1
kind: TracingPolicyNamespaced
metadata:
  name: tollgate-bypass-default
  namespace: team-a
  labels: {app.kubernetes.io/managed-by: tollgate-operator}
  annotations: {tollgate.dev/proxy-config: default}
  ownerReferences:
  - {apiVersion: tollgate.dev/v1alpha1, kind: ProxyConfig, name: default, uid: 0d8f5b8e-1111-4222-8333-444455556666, controller: true}
`;
const SCOPE = `
  podSelector: {}
  containerSelector: {matchExpressions: [{key: name, operator: NotIn, values: [tollgate-proxy]}]}
`;
const ADDRESSES = '["10.20.0.0/16", "162.159.140.245/32", "172.66.0.243/32", "2606:4700:3108::ac42:2af3/128"]';

const tcpConnect = (mode: string, action: string) =>
  parse(`${METADATA}
spec:${SCOPE}
  kprobes:
  - call: tcp_connect
    syscall: false
    message: "tollgate: ${mode === 'audit' ? 'seen' : 'stopped'} a connection to a provider of ProxyConfig default around the sidecar"
    tags: [tollgate, bypass, ${mode}]
    args: [{index: 0, type: sock}]
    selectors:
    - matchArgs:
      - {index: 0, operator: DAddr, values: ${ADDRESSES}}
      - {index: 0, operator: DPort, values: ["443", "8080"]}
      matchActions: [{action: ${action}}]
`) as unknown;

describe('the Tetragon bypass policy', () => {
  it('audit: tcp_connect from every container but the sidecar to the provider addresses and ports, Post only', () => {
    expect(renderBypassPolicy(INPUT)).toEqual(tcpConnect('audit', 'Post'));
  });

  it('enforce with sigkill: the same hook and selector, Sigkill', () => {
    expect(renderBypassPolicy({ ...INPUT, mode: 'enforce' })).toEqual(tcpConnect('enforce', 'Sigkill'));
  });

  it('enforce with override: security_socket_connect, the target matched as the sockaddr, connect() fails with -111', () => {
    const expected = parse(`${METADATA}
spec:${SCOPE}
  kprobes:
  - call: security_socket_connect
    syscall: false
    message: "tollgate: stopped a connection to a provider of ProxyConfig default around the sidecar"
    tags: [tollgate, bypass, enforce]
    args: [{index: 0, type: socket}, {index: 1, type: sockaddr}]
    selectors:
    - matchArgs:
      - {index: 1, operator: SAddr, values: ${ADDRESSES}}
      - {index: 1, operator: SPort, values: ["443", "8080"]}
      matchActions: [{action: Override, argError: -111}]
`) as unknown;
    expect(renderBypassPolicy({ ...INPUT, mode: 'enforce', action: 'override' })).toEqual(expected);
  });

  it('renders nothing when only loopback or nothing is known: such a policy would watch nothing', () => {
    expect(renderBypassPolicy({ ...INPUT, addresses: ['127.0.0.1', '::1'] })).toBeUndefined();
    expect(renderBypassPolicy({ ...INPUT, addresses: [] })).toBeUndefined();
  });

  it('exempts tollgate-proxy (the name the webhook gives the sidecar) as well as another provenance.sidecarContainer', () => {
    const policy = renderBypassPolicy({ ...INPUT, sidecarContainer: 'metering' }) as { spec: { containerSelector: unknown } };
    expect(policy.spec.containerSelector).toEqual({ matchExpressions: [{ key: 'name', operator: 'NotIn', values: ['tollgate-proxy', 'metering'] }] });
  });
});
