import { describe, expect, it } from 'vitest';
import { hasOwnerReference, withOwnerReference } from './owner-reference.ts';

const owner = { apiVersion: 'apps/v1', kind: 'Deployment', name: 'tollgate-webhook', uid: 'u-1' };

describe('owner references', () => {
  it('adds the owner once, keeping owners the object already has', () => {
    const other = { apiVersion: 'v1', kind: 'ConfigMap', name: 'x', uid: 'u-2' };
    const added = withOwnerReference({ name: 's', ownerReferences: [other] }, owner);
    expect(added.ownerReferences).toEqual([other, owner]);
    expect(withOwnerReference(added, owner)).toBe(added);
    expect(hasOwnerReference(added, owner)).toBe(true);
  });

  it('matches by uid: a Deployment of the same name recreated (a reinstall) is another owner', () => {
    const old = withOwnerReference({ name: 's' }, { ...owner, uid: 'u-old' });
    expect(hasOwnerReference(old, owner)).toBe(false);
    expect(withOwnerReference(old, owner).ownerReferences?.map((r) => r.uid)).toEqual(['u-old', 'u-1']);
  });

  it('changes nothing without an owner (running outside a cluster)', () => {
    const meta = { name: 's' };
    expect(withOwnerReference(meta, undefined)).toBe(meta);
    expect(hasOwnerReference(meta, undefined)).toBe(true);
  });
});
