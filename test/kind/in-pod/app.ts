// The app container of the node test's Deployment: a process that does nothing until it is stopped. The test
// makes its calls with `kubectl exec … node test/kind/in-pod/client.ts`, from inside this container.

process.on('SIGTERM', () => process.exit(0));
process.on('SIGINT', () => process.exit(0));
setInterval(() => {}, 1 << 30);
