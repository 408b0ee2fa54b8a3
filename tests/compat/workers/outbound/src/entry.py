from urllib.parse import urlparse

import js
from pyodide.http import pyfetch
from workers import Response, WorkerEntrypoint, fetch


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        url = urlparse(request.url)
        target = f"{url.scheme}://{url.netloc}/fetch-env"
        one = await pyfetch(target, method="POST")
        two = await js.fetch(target, {"method": "PUT"})
        three = await fetch(target)
        texts = [await one.text(), await two.text(), await three.text()]
        return Response.json({"status": one.status, "ok": two.ok, "texts": texts})
