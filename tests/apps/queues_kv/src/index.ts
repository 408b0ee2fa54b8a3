// POST / enqueues a job and answers its id; GET /?id=... answers the job's result once the
// queue consumer has written it into KV (404 until then).
interface Job {
  id: string;
  text: string;
}

interface Result {
  id: string;
  words: number;
  shout: string;
}

interface Env {
  JOBS: Queue<Job>;
  RESULTS: KVNamespace;
}

function resultKey(id: string): string {
  return `result:${id}`;
}

export default {
  async fetch(request, env): Promise<Response> {
    if (request.method === "POST") {
      const job: Job = { id: crypto.randomUUID(), text: await request.text() };
      await env.JOBS.send(job);
      return Response.json({ id: job.id }, { status: 202 });
    }
    const id = new URL(request.url).searchParams.get("id");
    if (!id) {
      return new Response("GET /?id=<job id>, or POST / with the job's text\n", { status: 400 });
    }
    const result = await env.RESULTS.get<Result>(resultKey(id), "json");
    if (result === null) {
      return new Response(`job ${id}: no result yet\n`, { status: 404 });
    }
    return Response.json(result);
  },

  async queue(batch, env): Promise<void> {
    for (const message of batch.messages) {
      const { id, text } = message.body;
      const result: Result = {
        id,
        words: text.split(/\s+/).filter((w) => w.length > 0).length,
        shout: text.toUpperCase(),
      };
      await env.RESULTS.put(resultKey(id), JSON.stringify(result), {
        metadata: { attempts: message.attempts },
      });
      message.ack();
    }
  },
} satisfies ExportedHandler<Env, Job>;
