// firebase_storage.js PORT: the Cloud Storage emulator of firebase-tools,
// on 127.0.0.1:PORT, until SIGTERM.  Started as a library, not with
// `firebase emulators:start`: the CLI insists on Java 21 for the rules
// runtime (a jar it downloads), and the Cloud Storage JSON API routes
// (lib/emulator/storage/apis/gcloud.js) use the emulator's admin layer,
// which no rule checks, so the rules runtime is left out.  Everything a
// request meets on those routes is the emulator's own code.
"use strict";
const { StorageEmulator } = require("firebase-tools/lib/emulator/storage/index.js");
const { EmulatorRegistry } = require("firebase-tools/lib/emulator/registry.js");

const port = Number(process.argv[2]);
const emu = new StorageEmulator({
  projectId: "demo-lockgate",
  host: "127.0.0.1",
  port,
  rules: "unused.rules",
  auto_download: false,
});
for (const part of [emu._rulesRuntime, emu._rulesManager]) {
  part.start = async () => {};
  part.stop = async () => {};
}
EmulatorRegistry.start(emu).then(
  () => console.log(`listening ${port}`),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
process.on("SIGTERM", () => process.exit(0));
