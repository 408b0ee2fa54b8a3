// The seed's example project: its Worker configured in TypeScript, as open-compute does.
import { bindings, defineConfig } from "cf/config";

export default defineConfig({
  worker: {
    name: "queue-app",
    entrypoint: "src/index.ts",
    env: {
      QUEUE: bindings.queue({ name: "jobs" }),
      GREETING: bindings.var("hello from cf.config"),
    },
    triggers: {
      queues: [{ queue: "jobs", maxBatchSize: 5, maxBatchTimeout: 0, maxRetries: 2 }],
    },
  },
});
