import json

from js import Object
from pyodide.ffi import to_js
from workers import Response, WorkerEntrypoint


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        if request.url.endswith("/batch"):
            messages = [
                {"body": {"kind": "batch", "n": 1}},
                {"body": {"kind": "batch", "n": 2}, "delaySeconds": 0},
                {"body": "a text message", "contentType": "text"},
            ]
            await self.env.MY_QUEUE.sendBatch(to_js(messages, dict_converter=Object.fromEntries))
            return Response("Sent batch!")
        await self.env.MY_QUEUE.send(
            to_js(
                {
                    "url": request.url,
                    "method": request.method,
                    "headers": dict(request.headers),
                }
            )
        )
        return Response("Sent!")

    async def queue(self, batch, env, ctx):
        for message in batch.messages:
            body = message.body.to_py()
            kind = "dict" if isinstance(body, dict) else "str" if isinstance(body, str) else "?"
            print(f"consumed {batch.queue} {kind} {json.dumps(body)}", flush=True)
            message.ack()
