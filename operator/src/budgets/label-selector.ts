// metav1.LabelSelector matching, as the API server defines it: every matchLabels pair and every
// matchExpressions requirement must hold; an empty (or absent) selector matches every pod.

import type { LabelSelector } from '../../../crds/index.ts';

export function selectorMatches(selector: LabelSelector | undefined, labels: Readonly<Record<string, string>>): boolean {
  if (!selector) return true;
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) {
    if (labels[key] !== value) return false;
  }
  for (const requirement of selector.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, requirement.key);
    const value = labels[requirement.key];
    const values = requirement.values ?? [];
    switch (requirement.operator) {
      case 'In':
        if (!has || !values.includes(value!)) return false;
        break;
      case 'NotIn':
        if (has && values.includes(value!)) return false;
        break;
      case 'Exists':
        if (!has) return false;
        break;
      case 'DoesNotExist':
        if (has) return false;
        break;
    }
  }
  return true;
}
