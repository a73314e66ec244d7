// The Firestore emulator process of the test suite (test/emulators/firestore.ts, used by the span stores and the
// budget ledger): @firestore-emulator/server, in memory, served on 127.0.0.1 only (the package's own start()
// would listen on every interface).
//   node test/emulators/firestore-server.ts PORT      prints "listening <port>" once it serves
//
// The package's own FirestoreServer is used, not its service class imported from dist/: that file bundles a
// second copy of the emulator's state and error classes, and a failed precondition (create() of a document
// that exists) then comes back as UNKNOWN "Something went wrong" instead of ALREADY_EXISTS, which the budget
// ledger's batch markers and alert claims depend on.

import { createRequire } from 'node:module';
import type { Server } from '@grpc/grpc-js';
import { FirestoreServer } from '@firestore-emulator/server';

// The emulator pins its own @grpc/grpc-js; its server only takes credentials made by that copy.
const emulatorRequire = createRequire(createRequire(import.meta.url).resolve('@firestore-emulator/server'));
const { ServerCredentials } = emulatorRequire('@grpc/grpc-js') as typeof import('@grpc/grpc-js');

const port = Number(process.argv[2] ?? 0);
const emulator = new FirestoreServer();
// Its start() binds every interface; tests serve on loopback only, so bind its gRPC server ourselves.
const server = (emulator as unknown as { server: Server }).server;
server.bindAsync(`127.0.0.1:${port}`, ServerCredentials.createInsecure(), (error, bound) => {
  if (error) {
    process.stderr.write(`firestore emulator: ${error.message}\n`);
    process.exit(1);
  }
  process.stdout.write(`listening ${bound}\n`);
});
const stop = () => server.tryShutdown(() => process.exit(0));
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
