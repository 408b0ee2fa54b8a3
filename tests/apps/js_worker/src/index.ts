// A test Worker in TypeScript, run by ocd in workerd. Its fetch sends what the test asks
// through env.QUEUE; its queue() logs one JSON line per message ({"record": ...}), which
// reaches ocd's log tagged with the worker, then acts as a dict body says: {"ack": true},
// {"retry": N}, {"fail": true}, {"ackAll": true}, {"retryAll": N}, {"sleepFirst": ms} (on
// its first attempt only); then, unless {"noEcho": true}, it sends the body on through
// env.ECHO as json, with the type it arrived as and its attempt.
import { describe } from "./describe";

interface Env {
  QUEUE: Queue;
  ECHO?: Queue;
}

type Spec = {
  binding?: string;
  body?: unknown;
  b64?: string;
  contentType?: QueueContentType;
  delaySeconds?: number;
  v8Sample?: boolean;
};

function bodyOf(spec: Spec): unknown {
  if (spec.b64 !== undefined) return Uint8Array.from(atob(spec.b64), (c) => c.charCodeAt(0));
  if (spec.v8Sample) {
    return { when: new Date(Date.UTC(2026, 0, 2, 3, 4, 5)), big: 2n ** 70n, set: new Set([1, 2]), map: new Map([[1, "one"]]), nested: { a: [1, "x", null] } };
  }
  return spec.body;
}

let release: (value?: unknown) => void = () => {};

class RouteError extends Error {
  name = "RouteError";
}

function throwFrom(handler: string): never {
  throw new RouteError(`thrown by ${handler}() on purpose`);
}

export default {
  async fetch(request: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
    const path = new URL(request.url).pathname;
    try {
      if (path.endsWith("/send")) {
        const spec = (await request.json()) as Spec;
        const options: QueueSendOptions = {};
        if (spec.contentType) options.contentType = spec.contentType;
        if (spec.delaySeconds !== undefined) options.delaySeconds = spec.delaySeconds;
        const queue = (env as any)[spec.binding ?? "QUEUE"] as Queue;
        const result = await queue.send(bodyOf(spec), options);
        return Response.json({ ok: true, result });
      }
      if (path.endsWith("/send-batch")) {
        const specs = (await request.json()) as Spec[];
        const result = await env.QUEUE.sendBatch(
          specs.map((s) => ({ body: bodyOf(s), contentType: s.contentType, delaySeconds: s.delaySeconds })),
        );
        return Response.json({ ok: true, result });
      }
      if (path.endsWith("/echo")) {
        const body = await request.text();
        if (request.headers.get("Authorization") !== "Bearer let-me-in") {
          return new Response("unauthorized", { status: 401, headers: { "WWW-Authenticate": "Bearer" } });
        }
        return Response.json(
          { method: request.method, body, query: new URL(request.url).search, agent: request.headers.get("X-Agent") },
          { status: 201, headers: { "X-Echo": "yes" } },
        );
      }
      if (path.endsWith("/headers")) {
        // what reached the Worker, exactly: every header, and the body's length and digest
        const body = new Uint8Array(await request.arrayBuffer());
        const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", body));
        return Response.json({
          method: request.method,
          url: request.url,
          headers: [...request.headers],
          length: body.byteLength,
          sha256: [...digest].map((b) => b.toString(16).padStart(2, "0")).join(""),
        });
      }
      if (path.endsWith("/sse")) {
        // one event now, the next once the test releases it (/sse-release): a client that
        // reads the first before the release sees the answer streamed, not buffered
        const { readable, writable } = new TransformStream();
        const writer = writable.getWriter();
        const encoder = new TextEncoder();
        const released = new Promise((resolve) => {
          release = resolve;
          setTimeout(resolve, 20_000);
        });
        const events = (async () => {
          await writer.write(encoder.encode("event: tick\ndata: first\n\n"));
          await released;
          await writer.write(encoder.encode("event: tick\ndata: second\n\n"));
          await writer.close();
        })();
        ctx.waitUntil(events);
        return new Response(readable, { headers: { "Content-Type": "text/event-stream" } });
      }
      if (path.endsWith("/sse-release")) {
        release();
        return new Response("released");
      }
      if (path.endsWith("/throw")) {
        throwFrom("fetch");
      }
      if (path.endsWith("/metrics")) {
        return Response.json({ ok: true, result: await env.QUEUE.metrics() });
      }
    } catch (e) {
      if (e instanceof RouteError) throw e;
      return Response.json({ ok: false, error: String(e) }, { status: 400 });
    }
    return new Response(`hello from ${request.method} ${path}`, { headers: { "X-Worker": "js" } });
  },

  async scheduled(controller: ScheduledController, env: Env): Promise<void> {
    console.log(JSON.stringify({ scheduled: controller.cron, time: controller.scheduledTime }));
    if (controller.cron === "0 0 1 1 *") throw new Error("this schedule fails");
    if (env.ECHO) await env.ECHO.send({ from: "cron", cron: controller.cron, time: controller.scheduledTime });
  },

  async queue(batch: MessageBatch, env: Env): Promise<void> {
    let fail = false;
    for (const m of batch.messages) {
      const body = m.body as any;
      console.log(JSON.stringify({ record: true, queue: batch.queue, id: m.id, attempts: m.attempts, ...describe(body) }));
      if (body && typeof body === "object" && body.constructor === Object) {
        if (body.ack) m.ack();
        if ("retry" in body) m.retry({ delaySeconds: body.retry });
        if (body.fail) fail = true;
        if (body.throwNamed) throwFrom("queue");
        if (body.ackAll) batch.ackAll();
        if ("retryAll" in body) batch.retryAll({ delaySeconds: body.retryAll });
        if (body.sleepFirst && m.attempts === 1) await new Promise((r) => setTimeout(r, body.sleepFirst));
      }
      if (env.ECHO && !(body && body.noEcho)) {
        await env.ECHO.send({ from: "js", id: m.id, attempts: m.attempts, ...describe(body) });
      }
    }
    if (fail) throw new Error("the message asked the handler to fail");
  },
};
