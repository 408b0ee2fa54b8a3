from workers import WorkerEntrypoint, wsgi


def wsgi_app(environ, start_response):
    body = f"wsgi {environ['REQUEST_METHOD']} {environ['PATH_INFO']} {environ['QUERY_STRING']}"
    body += f" {environ['workers.env'].MESSAGE}"
    start_response("200 OK", [("Content-Type", "text/plain"), ("X-App", "wsgi")])
    return [body.encode()]


async def asgi_app(scope, receive, send):
    request = await receive()
    body = f"asgi {scope['method']} {scope['path']} {request['body'].decode()}"
    body += f" {scope['env'].MESSAGE}"
    await send({"type": "http.response.start", "status": 201, "headers": [(b"x-app", b"asgi")]})
    await send({"type": "http.response.body", "body": body.encode()})


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        if "/asgi" in request.url:
            import asgi

            return await asgi.fetch(asgi_app, request.js_object, self.env)
        return await wsgi.fetch(wsgi_app, request, self.env)
