from workers import Response, WorkerEntrypoint


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        if "/api/" in request.url:
            return Response.json({"api": request.url.rsplit("/", 1)[-1]})
        # Example of serving static assets
        return await self.env.ASSETS.fetch(request)
