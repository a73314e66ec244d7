// The Firestore emulator process of the test suite (test/emulators/firestore.ts): @firestore-emulator/server's
// service, in memory, bound to 127.0.0.1 only (the package's own start() would listen on every interface).
//   node test/emulators/firestore-server.ts PORT     prints "listening <port>" once it serves

import { Server, ServerCredentials } from '@grpc/grpc-js';
import { FirestoreState } from '@firestore-emulator/server';
// The service implementation is not re-exported by the package's index; the version is pinned in package.json.
import { FirestoreServiceV1Impl } from '@firestore-emulator/server/dist/server/FirestoreServiceV1Impl/index.js';

const server = new Server();
server.addService(FirestoreServiceV1Impl.definition, new FirestoreServiceV1Impl(new FirestoreState()) as never);
server.bindAsync(`127.0.0.1:${Number(process.argv[2] ?? 0)}`, ServerCredentials.createInsecure(), (error, port) => {
  if (error) {
    process.stderr.write(`firestore emulator: ${error.message}\n`);
    process.exit(1);
  }
  process.stdout.write(`listening ${port}\n`);
});
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    server.forceShutdown();
    process.exit(0);
  });
}
