"""What Python worker code imports. Inside workers that ocd loads it is also ``workers``::

    from workers import WorkerEntrypoint, Response

    class Default(WorkerEntrypoint):
        async def fetch(self, request):
            await self.env.QUEUE.send({"url": request.url})
            return Response("queued")

        async def queue(self, batch, env, ctx):
            for message in batch.messages:
                message.ack()

This package imports nothing from the daemon, so worker code can be unit-tested without it.
"""

from runtime._jsdict import JsDict
from runtime.context import Env, ExecutionContext, WorkerEntrypoint
from runtime.http import Request, Response
from runtime.queue import BatchMarks, Message, MessageBatch, Queue, QueueBackend

__all__ = [
    "BatchMarks",
    "Env",
    "ExecutionContext",
    "JsDict",
    "Message",
    "MessageBatch",
    "Queue",
    "QueueBackend",
    "Request",
    "Response",
    "WorkerEntrypoint",
]
