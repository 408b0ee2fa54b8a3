from greeting import shout
from workers import Response, WorkerEntrypoint


class Default(WorkerEntrypoint):
    async def fetch(self, request, env):
        return Response(shout(env.GREETING) + " " + request.method)
