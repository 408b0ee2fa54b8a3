interface Env {
  QUEUE: Queue<{ id: string; greeting: string }>;
  GREETING: string;
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const id = new URL(request.url).searchParams.get("id") ?? "none";
    await env.QUEUE.send({ id, greeting: env.GREETING });
    return new Response(`queued ${id}`);
  },

  async queue(batch: MessageBatch<{ id: string; greeting: string }>): Promise<void> {
    for (const message of batch.messages) {
      console.log(`consumed ${message.body.id} (${message.body.greeting})`);
      message.ack();
    }
  },
};
