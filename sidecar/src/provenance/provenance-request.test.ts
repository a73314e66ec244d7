// What the sidecar's own Tetragon stream asks for: its pod's events only, and execs and exits besides the
// kprobes only while the causal trail is on (ADR 1600, ADR 1604).

import { describe, expect, it } from 'vitest';
import { provenanceRequest } from './provenance-runtime.ts';

describe('the own stream’s filter', () => {
  it('asks for the pod’s kprobes, plus its execs and exits with the trail on', () => {
    const placement = { podName: 'web-1.a', podNamespace: 'team-a' };
    expect(provenanceRequest(placement)).toEqual({ allow_list: [{ namespace: ['team-a'], pod_regex: ['^web-1\\.a$'], event_set: ['PROCESS_KPROBE'] }] });
    expect(provenanceRequest(placement, true)).toEqual({
      allow_list: [{ namespace: ['team-a'], pod_regex: ['^web-1\\.a$'], event_set: ['PROCESS_EXEC', 'PROCESS_EXIT', 'PROCESS_KPROBE'] }],
    });
  });

  it('outside a pod, asks by event type alone', () => {
    expect(provenanceRequest({}, true)).toEqual({ allow_list: [{ event_set: ['PROCESS_EXEC', 'PROCESS_EXIT', 'PROCESS_KPROBE'] }] });
  });
});
