// Miniflare 4 (what `wrangler dev` runs: in-memory queues) serving make bench's JS worker.
// node miniflare.mjs <script> <port>; prints "ready <url>" once it listens.
import { dirname } from "node:path";
import { Miniflare } from "miniflare";

const [script, port] = process.argv.slice(2);
const mf = new Miniflare({
  modules: true,
  scriptPath: script,
  modulesRoot: dirname(script),
  compatibilityDate: "2026-03-01",
  queueProducers: { QUEUE: "bench" },
  queueConsumers: { bench: { maxBatchSize: 100, maxBatchTimeout: 1 } },
  host: "127.0.0.1",
  port: Number(port),
});
const url = await mf.ready;
console.log(`ready ${url}`);
const stop = async () => {
  await mf.dispose();
  process.exit(0);
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
