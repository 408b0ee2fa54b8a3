// ocd's bridge Worker: the one way into a Worker's queue() and scheduled() from outside
// workerd (Fetcher.queue / Fetcher.scheduled, flag service_binding_extra_handlers).
//
// POST /queue/<binding>      a batch, framed: 4-byte big-endian header length, the header
//                            as JSON {queue, metrics, messages: [{id, timestamp, attempts,
//                            contentType, size}]}, then the bodies back to back.
//                            Answers the FetcherQueueResult as JSON.
// POST /scheduled/<binding>  JSON {cron, scheduledTime}; answers {outcome, noRetry}.
// Every request carries "Authorization: Bearer <SECRET>", the secret of this workerd start.

const utf8 = new TextDecoder();
const strictUtf8 = new TextDecoder("utf-8", { fatal: true });
const encoder = new TextEncoder();

function authorized(request, env) {
  const given = encoder.encode(request.headers.get("Authorization") || "");
  const wanted = encoder.encode(`Bearer ${env.SECRET}`);
  return given.byteLength === wanted.byteLength && crypto.subtle.timingSafeEqual(given, wanted);
}

function messagesOf(frame) {
  const view = new DataView(frame);
  const headerLength = view.getUint32(0);
  const header = JSON.parse(utf8.decode(new Uint8Array(frame, 4, headerLength)));
  let offset = 4 + headerLength;
  const messages = [];
  const undecodable = [];  // each its own failure: left out, reported, dead-lettered by ocd
  for (const m of header.messages) {
    const bytes = new Uint8Array(frame, offset, m.size);
    offset += m.size;
    const out = { id: m.id, timestamp: new Date(m.timestamp), attempts: m.attempts };
    try {
      switch (m.contentType) {
        case "text": out.body = strictUtf8.decode(bytes); break;
        case "json": out.body = JSON.parse(strictUtf8.decode(bytes)); break;
        case "bytes": out.body = bytes.slice(); break;
        default: out.serializedBody = bytes.slice(); // v8: checked by ocd beforehand
      }
    } catch (e) {
      undecodable.push({ id: m.id, reason: `${m.contentType} body: ${e}` });
      continue;
    }
    messages.push(out);
  }
  return { header, messages, undecodable };
}

export default {
  async fetch(request, env) {
    if (!authorized(request, env)) return new Response("forbidden", { status: 403 });
    const url = new URL(request.url);
    const [, kind, binding] = url.pathname.split("/");
    const target = env[binding];
    if (request.method !== "POST" || !target || !binding.startsWith("W_")) {
      return new Response("not found", { status: 404 });
    }
    if (kind === "queue") {
      const { header, messages, undecodable } = messagesOf(await request.arrayBuffer());
      const m = header.metrics || {};
      const metadata = { metrics: { backlogCount: m.backlogCount || 0, backlogBytes: m.backlogBytes || 0 } };
      if (m.oldestMessageTimestamp) metadata.metrics.oldestMessageTimestamp = new Date(m.oldestMessageTimestamp);
      const result = messages.length
        ? await target.queue(header.queue, messages, metadata)
        : { outcome: "ok", ackAll: false, retryBatch: { retry: false }, explicitAcks: [], retryMessages: [] };
      return Response.json({ ...result, undecodable });
    }
    if (kind === "scheduled") {
      const body = await request.json();
      const result = await target.scheduled({ cron: body.cron, scheduledTime: new Date(body.scheduledTime) });
      return Response.json(result);
    }
    return new Response("not found", { status: 404 });
  },
};
