// google_client.js HOST:PORT BUCKET: what lockgate does to a lock object,
// done with Google's own Node.js client (@google-cloud/storage), against
// a storage at HOST:PORT (its emulator setting).  Prints one line per step
// and exits 1 when the storage answered otherwise than Cloud Storage does.
"use strict";
const { Storage } = require("@google-cloud/storage");

const [hostport, bucketName] = process.argv.slice(2);
const storage = new Storage({
  apiEndpoint: `http://${hostport}`,
  projectId: "lockgate-interop",
  retryOptions: { maxRetries: 0 },
});
const bucket = storage.bucket(bucketName);
const prefix = `interop-${Math.random().toString(16).slice(2, 10)}/`;
let failed = 0;

function check(what, ok, detail) {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}${detail ? ": " + detail : ""}`);
  if (!ok) failed++;
}

async function status(p) {
  try {
    await p;
    return 200;
  } catch (err) {
    return err.code || String(err);
  }
}

async function main() {
  const f = bucket.file(prefix + "lock");
  const opts = (md, pre) => ({
    resumable: false,
    validation: false, // the fake keeps no md5Hash or crc32c: lockgate reads neither
    metadata: { cacheControl: "no-store", metadata: md },
    preconditionOpts: pre,
  });
  await f.save("", opts({ lease_id: "L1" }, { ifGenerationMatch: 0 }));
  const [m1] = await f.getMetadata();
  check("insert ifGenerationMatch=0", /^[0-9]+$/.test(String(m1.generation)) &&
    String(m1.metageneration) === "1" && m1.metadata.lease_id === "L1",
    `generation ${m1.generation}, metageneration ${m1.metageneration}`);
  const again = await status(f.save("", opts({ lease_id: "L2" }, { ifGenerationMatch: 0 })));
  check("insert again ifGenerationMatch=0 is 412", again === 412, String(again));
  const wrong = await status(f.setMetadata({ metadata: { ttl: "60" } },
    { ifGenerationMatch: m1.generation, ifMetagenerationMatch: 2 }));
  check("patch with a wrong metageneration is 412", wrong === 412, String(wrong));
  const [m2] = await f.setMetadata({ metadata: { ttl: "60" } },
    { ifGenerationMatch: m1.generation, ifMetagenerationMatch: 1 });
  check("patch with the right ones: same generation, metageneration 2",
    String(m2.generation) === String(m1.generation) && String(m2.metageneration) === "2" &&
    m2.metadata.ttl === "60" && m2.metadata.lease_id === "L1",
    `generation ${m2.generation}, metageneration ${m2.metageneration}`);
  const [m3] = await f.setMetadata({ metadata: { ttl: null } },
    { ifGenerationMatch: m1.generation, ifMetagenerationMatch: 2 });
  check("patch to null removes the key", !m3.metadata || !("ttl" in m3.metadata),
    JSON.stringify(m3.metadata));
  const delWrong = await status(f.delete({ ifGenerationMatch: Number(m1.generation) + 1,
    ifMetagenerationMatch: 3 }));
  check("delete with a wrong generation is 412", delWrong === 412, String(delWrong));
  const del = await status(f.delete({ ifGenerationMatch: m1.generation, ifMetagenerationMatch: 3 }));
  check("delete with the right ones", del === 200, String(del));
  const gone = await status(f.getMetadata());
  check("read after delete is 404", gone === 404, String(gone));
  for (let i = 0; i < 5; i++)
    await bucket.file(`${prefix}l${i}`).save("", opts({ lease_id: `P${i}` }, { ifGenerationMatch: 0 }));
  const names = [];
  let query = { prefix, maxResults: 2, autoPaginate: false };
  for (let pages = 0; query && pages < 10; pages++) {
    const [files, next] = await bucket.getFiles(query);
    names.push(...files.map((x) => x.name));
    query = next;
  }
  check("list by prefix in pages of 2", names.length === 5 && new Set(names).size === 5,
    `${names.length} names`);
  for (let i = 0; i < 5; i++) await bucket.file(`${prefix}l${i}`).delete();
}

main().then(
  () => process.exit(failed ? 1 : 0),
  (err) => {
    console.log(`FAIL ${err.code || ""} ${err.message}`);
    process.exit(1);
  },
);
