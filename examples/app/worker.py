"""The example app: POST a JSON body to / and the consumer logs it.

    curl -X POST localhost:8787/ -d '{"hello":"world"}'
"""

import logging

from workers import Response, WorkerEntrypoint

log = logging.getLogger("example")


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        if request.method != "POST":
            return Response(f"{self.env.GREETING}! POST a JSON body here to enqueue it.\n")
        try:
            body = await request.json()
        except ValueError:
            return Response.json({"error": "the body must be JSON"}, status=400)
        result = await self.env.QUEUE.send(body)
        return Response.json(
            {"queued": True, "backlog": result.metadata.metrics.backlogCount}, status=202
        )

    async def queue(self, batch, env, ctx):
        for message in batch.messages:
            log.info(
                "received %s from %s (attempt %d): %r",
                message.id,
                batch.queue,
                message.attempts,
                message.body,
            )
            message.ack()
