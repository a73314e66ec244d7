// Kubernetes MicroTime (Lease renewTime, Event eventTime) is RFC 3339 with exactly six fractional digits;
// metav1.Time (condition lastTransitionTime) is RFC 3339 to the second.

export function microTime(date: Date = new Date()): string {
  return date.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

export function rfc3339(date: Date = new Date()): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}
