"""What Python worker code imports. Inside workers that ocd loads it is also ``workers``::

    from workers import WorkerEntrypoint, Response

    class Default(WorkerEntrypoint):
        async def fetch(self, request):
            await self.env.QUEUE.send({"url": request.url})
            return Response("queued")

        async def queue(self, batch, env, ctx):
            for message in batch.messages:
                message.ack()

Cloudflare's other exports import too: ``fetch``, ``wsgi``, ``asgi``, ``handler``, ``env``,
``wait_until``, ``python_to_rpc``; ``DurableObject`` and ``WorkflowEntrypoint`` can be
subclassed, but the bindings that would run them are refused by ocd's config check.

This package imports nothing from the daemon, so worker code can be unit-tested without it.
"""

from runtime import asgi, wsgi
from runtime._jsdict import JsDict
from runtime.context import (
    Env,
    ExecutionContext,
    WorkerEntrypoint,
    env,
    handler,
    python_from_rpc,
    python_to_rpc,
    wait_until,
    waitUntil,
)
from runtime.d1 import D1Database, D1Error, D1PreparedStatement
from runtime.fetch import FetchResponse, fetch
from runtime.http import Request, Response
from runtime.kv import KvError, KvNamespace
from runtime.queue import BatchMarks, Message, MessageBatch, Queue, QueueBackend
from runtime.scheduled import ScheduledController
from runtime.service import Fetcher
from runtime.unsupported import (
    DurableObject,
    WorkflowEntrypoint,
    WorkflowStep,
    import_from_javascript,
)
from runtime.values import JsBytes, JsList, JsStr

__all__ = [
    "BatchMarks",
    "D1Database",
    "D1Error",
    "D1PreparedStatement",
    "DurableObject",
    "Env",
    "ExecutionContext",
    "FetchResponse",
    "Fetcher",
    "JsBytes",
    "JsDict",
    "JsList",
    "JsStr",
    "KvError",
    "KvNamespace",
    "Message",
    "MessageBatch",
    "Queue",
    "QueueBackend",
    "Request",
    "Response",
    "ScheduledController",
    "WorkerEntrypoint",
    "WorkflowEntrypoint",
    "WorkflowStep",
    "asgi",
    "env",
    "fetch",
    "handler",
    "import_from_javascript",
    "python_from_rpc",
    "python_to_rpc",
    "waitUntil",
    "wait_until",
    "wsgi",
]
