// The Worker of Cloudflare's Queues page, unchanged: ocd runs it in workerd and keeps its
// queue's messages durable (SQLite or PostgreSQL), shared with every other surface.
interface Env {
  QUEUE: Queue;
}

export default {
  async fetch(request, env): Promise<Response> {
    await env.QUEUE.send({ hello: "world" });
    return new Response("Sent message to the queue");
  },
  async queue(batch, env): Promise<void> {
    for (const message of batch.messages) {
      console.log(message.body);
      message.ack();
    }
  },
} satisfies ExportedHandler<Env>;
