from urllib.parse import urlparse

from describe import describe
from workers import Response, WorkerEntrypoint


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        path = urlparse(request.url).path
        await self.env.MY_QUEUE.send({"path": path})
        return Response("Sent!")

    async def queue(self, batch):
        for message in batch.messages:
            print(describe(self.env.PREFIX, batch.queue, message), flush=True)
            message.ack()
