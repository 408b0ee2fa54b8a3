// The seed's example Worker: fetch sends to env.QUEUE, queue() consumes. A message whose id
// starts with "hold" waits a minute on its first delivery, so a test can kill ocd mid-batch.
interface Job {
  id: string;
  greeting: string;
}

interface Env {
  QUEUE: Queue<Job>;
  GREETING: string;
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const id = new URL(request.url).searchParams.get("id") ?? "none";
    await env.QUEUE.send({ id, greeting: env.GREETING });
    return new Response(`queued ${id}`);
  },

  async queue(batch: MessageBatch<Job>): Promise<void> {
    for (const message of batch.messages) {
      const { id, greeting } = message.body;
      console.log(`received ${id} attempt ${message.attempts}`);
      if (id.startsWith("hold") && message.attempts === 1) {
        await new Promise((resolve) => setTimeout(resolve, 60_000));
      }
      console.log(`consumed ${id} (${greeting})`);
      message.ack();
    }
  },
};
