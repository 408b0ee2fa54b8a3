// make bench's JS worker: the same code under ocd, workerd's built-in queues and Miniflare.
// GET /produce?n=&lanes=&batch=&single=1 sends n messages from `lanes` concurrent loops
// (sendBatch of `batch`, or one send() each) and answers how long that took; queue() counts
// and acks; GET /count answers the count and when the last message was consumed.
let consumed = 0;
let lastAt = 0;
const latencies = [];

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const q = (name, dflt) => Number(url.searchParams.get(name) ?? dflt);
    if (url.pathname === "/produce") {
      const n = q("n", 1000), lanes = q("lanes", 4), batch = q("batch", 100);
      const single = url.searchParams.get("single") === "1";
      let next = 0;
      const started = Date.now();
      async function lane() {
        while (next < n) {
          const start = next;
          const k = single ? 1 : Math.min(batch, n - start);
          next += k;
          if (single) {
            await env.QUEUE.send({ i: start, at: Date.now() });
          } else {
            const messages = [];
            for (let j = 0; j < k; j++) messages.push({ body: { i: start + j } });
            await env.QUEUE.sendBatch(messages);
          }
        }
      }
      await Promise.all(Array.from({ length: lanes }, lane));
      return Response.json({ sent: n, ms: Date.now() - started });
    }
    if (url.pathname === "/count") {
      return Response.json({ consumed, lastAt, latencies });
    }
    if (url.pathname === "/reset") {
      consumed = 0;
      lastAt = 0;
      latencies.length = 0;
      return Response.json({ ok: true });
    }
    return new Response("bench worker");
  },

  async queue(batch) {
    const now = Date.now();
    for (const m of batch.messages) {
      if (m.body.at !== undefined) latencies.push(now - m.body.at);
    }
    consumed += batch.messages.length;
    lastAt = now;
    batch.ackAll();
  },
};
