"""A test worker whose consumer forwards each message's body to its OUT producer binding
(with the batch's backlog seen by the binding's metrics()), then acks."""


async def queue(batch, env, ctx):
    for m in batch.messages:
        await env.OUT.send({"forwarded": m.body.to_py(), "from": batch.queue, "id": m.id})
    await env.OUT.sendBatch([{"body": "as text", "contentType": "text"}])
    metrics = await env.OUT.metrics()
    assert metrics.backlogCount >= 2
