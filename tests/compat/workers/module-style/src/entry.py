from workers import Response


async def fetch(request, env, ctx):
    text = await request.text()
    await env.JOBS.send(text, contentType="text")
    return Response("queued " + text)


async def queue(batch):
    for message in batch.messages:
        print(f"module consumed {message.body.to_py()!r} attempt {message.attempts}", flush=True)
    batch.ackAll()
