"""A test worker for FIFO queues: its fetch sends batches with message groups, its consumer
behaves as an ordered consumer would and records what it did, one JSON line per message,
in the file named by the RECORD var.

POST /send-batch {"messages": [{"body": ..., "group": ..., "dedup": ...}, ...]}
POST /send {"body": ..., "group": ..., "dedup": ...}   (binding keyword arguments)

The consumer, per message in batch order: a message whose group already failed in this
batch is skipped (an ordered consumer does not process past a failure); otherwise, if the
body asks for it ({"poison": true}, or {"chaos": p} with a draw under p), it is retried
(recorded "retry"), else acked explicitly (recorded "ok"). A body {"chaos": p} also makes
the whole handler raise after its acks with probability p / 4, so explicit acks must
survive the throw. A body {"hang_first": true} on its first attempt records "hang" and
never returns (for a kill -9 mid-batch). Draws come from a Random seeded by message id
and attempt, so runs are repeatable.
"""

import asyncio
import json
import random

from workers import Response, WorkerEntrypoint


def _keys(spec):
    out = {}
    if "group" in spec:
        out["messageGroupId"] = spec["group"]
    if "dedup" in spec:
        out["messageDeduplicationId"] = spec["dedup"]
    return out


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        spec = await request.json()
        queue = getattr(self.env, spec.get("binding", "ORDERS"))
        try:
            if request.url.endswith("/send-batch"):
                items = [{"body": m["body"], **_keys(m)} for m in spec["messages"]]
                await queue.sendBatch(items)
            else:
                await queue.send(spec["body"], **_keys(spec))
        except Exception as e:  # the test wants to see the exact error
            return Response.json({"error": type(e).__name__, "message": str(e)}, status=400)
        return Response.json({"ok": True})

    async def queue(self, batch, env, ctx):
        failed = set()
        lines = []
        raise_after = False
        for m in batch.messages:
            body = m.body if isinstance(m.body, dict) else {}
            draw = random.Random(f"{m.id}:{m.attempts}")
            line = {
                "queue": batch.queue,
                "id": m.id,
                "group": m.groupId,
                "seq": m.sequenceNumber,
                "dedup": m.deduplicationId,
                "attempts": m.attempts,
                "n": body.get("n"),
                "batch": len(batch.messages),
            }
            if body.get("hang_first") and m.attempts == 1:
                line["did"] = "hang"
                with open(env.RECORD, "a") as f:
                    f.write("".join(lines) + json.dumps(line) + "\n")
                await asyncio.Event().wait()
            if m.groupId in failed:
                line["did"] = "skip"
            elif body.get("poison") or draw.random() < body.get("chaos", 0):
                m.retry()
                failed.add(m.groupId)
                line["did"] = "retry"
            else:
                m.ack()
                line["did"] = "ok"
            if draw.random() < body.get("chaos", 0) / 4:
                raise_after = True
            lines.append(json.dumps(line) + "\n")
        with open(env.RECORD, "a") as f:
            f.write("".join(lines))
        if raise_after:
            raise RuntimeError("chaos: the handler fails after its acks")
