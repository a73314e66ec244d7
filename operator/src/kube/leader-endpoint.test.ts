import { describe, expect, it } from 'vitest';
import { emptiedEndpointSlice, type LeaderAddress, leaderEndpointSlice, listedAddresses, listsOnly } from './leader-endpoint.ts';

const leader: LeaderAddress = { namespace: 'tg', service: 'tollgate-operator', identity: 'op-0', podIP: '10.0.0.7', port: 8443, portName: 'grpc' };

describe('leader EndpointSlice', () => {
  it('lists exactly the leader, ready, on the named push port, bound to the Service by label', () => {
    expect(leaderEndpointSlice(leader, '42')).toEqual({
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: {
        name: 'tollgate-operator',
        namespace: 'tg',
        resourceVersion: '42',
        labels: { 'kubernetes.io/service-name': 'tollgate-operator', 'endpointslice.kubernetes.io/managed-by': 'operator.tollgate.dev' },
        annotations: { 'tollgate.dev/leader': 'op-0' },
      },
      addressType: 'IPv4',
      endpoints: [{ addresses: ['10.0.0.7'], conditions: { ready: true, serving: true, terminating: false } }],
      ports: [{ name: 'grpc', port: 8443, protocol: 'TCP' }],
    });
    expect(leaderEndpointSlice({ ...leader, podIP: 'fd00::7' }).addressType).toBe('IPv6');
  });

  it('is up to date only when it says what the leader would write', () => {
    const slice = leaderEndpointSlice(leader, '1');
    expect(listsOnly(slice, leader)).toBe(true);
    expect(listsOnly(slice, { ...leader, podIP: '10.0.0.8' })).toBe(false);
    expect(listsOnly(slice, { ...leader, port: 9443 })).toBe(false);
    expect(listsOnly(slice, { ...leader, identity: 'op-1' })).toBe(false);
    expect(listsOnly({ ...slice, endpoints: [...slice.endpoints!, { addresses: ['10.0.0.8'] }] }, leader)).toBe(false);
    expect(listsOnly({ ...slice, endpoints: [{ addresses: ['10.0.0.7'], conditions: { ready: false } }] }, leader)).toBe(false);
    expect(listsOnly(emptiedEndpointSlice(slice), leader)).toBe(false);
  });

  it('names the owner, and a slice without it is rewritten (written before the chart named one)', () => {
    const owner = { apiVersion: 'apps/v1', kind: 'Deployment', name: 'tollgate-operator', uid: 'u-1' };
    const owned = leaderEndpointSlice({ ...leader, owner }, '3');
    expect(owned.metadata.ownerReferences).toEqual([owner]);
    expect(listsOnly(owned, { ...leader, owner })).toBe(true);
    expect(listsOnly(leaderEndpointSlice(leader, '3'), { ...leader, owner })).toBe(false);
    // Emptying on step-down keeps the owner: a PUT without it would orphan the slice.
    expect(emptiedEndpointSlice(owned).metadata.ownerReferences).toEqual([owner]);
  });

  it('empties to no endpoints and no leader, keeping the version it was read at', () => {
    const emptied = emptiedEndpointSlice(leaderEndpointSlice(leader, '7'));
    expect(emptied.endpoints).toEqual([]);
    expect(emptied.metadata.resourceVersion).toBe('7');
    expect(emptied.metadata.annotations).toEqual({});
    expect(listedAddresses(emptied)).toEqual([]);
    expect(listedAddresses({ ...emptied, endpoints: null })).toEqual([]);
  });
});
