from workers import Response, WorkerEntrypoint, wait_until


class Default(WorkerEntrypoint):
    async def fetch(self, request, env, ctx):
        async def later(what):
            print(f"waitUntil ran: {what}", flush=True)

        ctx.waitUntil(later("ctx"))
        wait_until(later("workers.wait_until"))
        return Response("accepted", status=202)
