"""A test worker: its fetch sends what the test asks, its consumer appends one JSON line per
delivered message to the file named by the RECORD var, then acts as the body says.

Body instructions (for dict bodies): {"ack": true} explicit ack; {"retry": N} retry with a
delay of N s; {"fail": true} the handler raises after recording; {"hang": true} the handler
never returns; {"sleep": S} the handler takes S seconds; {"wait_until_fail": true} a
waitUntil task raises.
"""

import asyncio
import base64
import datetime as dt
import json
import os
import time
from urllib.parse import urlparse

from workers import Response, WorkerEntrypoint

# In-process tests reach into these: how many batches are inside the handler right now, the
# most there ever were, and a gate that {"gate": true} messages wait on.
INFLIGHT = 0
MAX_INFLIGHT = 0
GATE = None


def v8_sample():
    shared = {"k": [1, 2]}
    return {
        1: {"a", "b"},
        (1, 2): ["t", 3],
        "when": dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
        "big": 2**70,
        "raw": b"\x00\x01",
        "a": shared,
        "b": shared,
    }


def body_from(spec):
    if "b64" in spec:
        return base64.b64decode(spec["b64"])
    if spec.get("v8_sample"):
        return v8_sample()
    return spec["body"]


def builtin_type(value):
    """The built-in type's name: bodies are subclasses of it that add to_py()."""
    return next(c for c in type(value).__mro__ if c.__module__ == "builtins").__name__


def jsonable(value):
    if isinstance(value, bytes | bytearray | memoryview):
        return {"b64": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {k: jsonable(v) for k, v in value.items()}
        return {"repr": repr(value)}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted(repr(v) for v in value)
    return value


SEND_OPTIONS = (
    "contentType",
    "delaySeconds",
    "messageGroupId",
    "messageDeduplicationId",
    "message_group_id",
    "message_deduplication_id",
)


def options(spec):
    return {key: spec[key] for key in SEND_OPTIONS if key in spec}


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        path = urlparse(request.url).path
        spec = await request.json() if request.method == "POST" else {}
        if path == "/freeze":  # block the whole event loop, as a buggy worker would
            time.sleep(spec["seconds"])
            return Response("thawed")
        queue = getattr(self.env, spec.get("binding", "QUEUE"))
        try:
            if path == "/send":
                result = await queue.send(body_from(spec), **options(spec))
            elif path == "/send-batch":
                msgs = []
                for m in spec["messages"]:
                    item = {"body": body_from(m)}
                    item.update(options(m))
                    msgs.append(item)
                batch_opts = (
                    {"delaySeconds": spec["delaySeconds"]} if "delaySeconds" in spec else {}
                )
                result = await queue.sendBatch(msgs, **batch_opts)
            elif path == "/metrics":
                result = await queue.metrics()
            else:
                return Response("not found", status=404)
        except Exception as e:  # the test wants to see the exact error
            error = {
                "error": type(e).__name__,
                "message": str(e),
                "type_error": isinstance(e, TypeError),
            }
            return Response.json(error, status=400)
        return Response.json(jsonable(result))

    async def queue(self, batch, env, ctx):
        global INFLIGHT, MAX_INFLIGHT
        INFLIGHT += 1
        MAX_INFLIGHT = max(MAX_INFLIGHT, INFLIGHT)
        started = time.time()
        try:
            await self._consume(batch, ctx)
        finally:
            INFLIGHT -= 1
            spans = getattr(self.env, "SPANS", None)
            if spans:  # when each batch ran, for limits that hold across processes
                span = {"pid": os.getpid(), "start": started, "end": time.time()}
                with open(spans, "a") as f:
                    f.write(json.dumps(span) + "\n")

    async def _consume(self, batch, ctx):
        global GATE
        env = self.env
        obey = not batch.queue.endswith("-dlq")
        fd = os.open(env.RECORD, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        fail = False
        try:
            for m in batch.messages:
                body = m.body
                line = {
                    "queue": batch.queue,
                    "id": m.id,
                    "attempts": m.attempts,
                    "ts": m.timestamp.isoformat(),
                    "type": builtin_type(body),
                    "body": jsonable(body),
                    "pid": os.getpid(),
                    "batch": len(batch.messages),
                    "backlog": batch.metadata.metrics.backlogCount,
                }
                if m.groupId is not None:  # a FIFO queue's message
                    line["group"] = m.groupId
                    line["seq"] = m.sequenceNumber
                    line["dedup"] = m.deduplicationId
                if isinstance(body, dict) and body.get("big") is not None:
                    line["v8_equal"] = body == v8_sample() and body["a"] is body["b"]
                if isinstance(body, dict) and "big" in body and "set" in body:  # JS's sample
                    line["v8_js"] = {
                        "when": body["when"].isoformat(),
                        "big": body["big"] == 2**70,
                        "set": body["set"] == {1, 2},
                        "map": body["map"] == {1: "one"},
                        "nested": body["nested"] == {"a": [1, "x", None]},
                    }
                os.write(fd, (json.dumps(line) + "\n").encode())
                if obey and isinstance(body, dict) and all(isinstance(k, str) for k in body):
                    if body.get("ack"):
                        m.ack()
                    if "retry" in body:
                        m.retry(delaySeconds=body["retry"])
                    if body.get("fail"):
                        fail = True
                    if body.get("sleep"):
                        await asyncio.sleep(body["sleep"])
                    if body.get("hang"):
                        await asyncio.Event().wait()
                    if body.get("wait_until_fail"):
                        ctx.waitUntil(_boom())
                    if body.get("gate"):
                        if GATE is None:
                            GATE = asyncio.Event()
                        await GATE.wait()
        finally:
            os.close(fd)
        if fail:
            raise RuntimeError("the message asked the handler to fail")


async def _boom():
    await asyncio.sleep(0)
    raise RuntimeError("waitUntil task failed")
