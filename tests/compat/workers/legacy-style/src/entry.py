from js import JSON, Response, console


async def on_fetch(request, env):
    console.log("on_fetch called")
    body = JSON.stringify({"name": env.NAME, "method": request.method})
    return Response.new(body, {"headers": {"content-type": "application/json"}})
