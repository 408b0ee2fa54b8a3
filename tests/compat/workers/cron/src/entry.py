from workers import Response, WorkerEntrypoint


class Default(WorkerEntrypoint):
    async def scheduled(self, controller, env, ctx):
        if controller.cron == "0 9 * * MON-FRI":
            controller.noRetry()
            raise RuntimeError("the weekday run failed")
        print(f"Scheduled task has been executed: {controller.cron}", flush=True)

    async def fetch(self):
        return Response("Hello from Cron Worker")
