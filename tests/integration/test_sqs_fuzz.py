"""Fuzzing both SQS protocols against a real daemon: ``COUNT`` bad requests each (seeded,
``sqs_inputs``), sent ``CONCURRENCY`` at a time over kept-alive connections. Every answer
must be:

* never a 5xx, and nothing logged at ERROR (a handler's traceback);
* without ``Traceback`` or ``Internal`` in its body;
* in the protocol's envelope: AWS JSON answers ``application/x-amz-json-1.0`` with a JSON
  object, an error one with a ``__type``; Query answers ``text/xml``, an error one an
  ``ErrorResponse`` with a code, a success one an ``<Action>Response``.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator

import aiohttp
import pytest

from ocd.http.sqs.query import XMLNS
from tests.integration.sqs import SqsDaemon, start
from tests.integration.sqs_inputs import JSON_TYPE, Inputs, Request, Targets

pytestmark = pytest.mark.timeout(180)
COUNT = int(os.environ.get("OCD_SQS_FUZZ_COUNT", "10000"))  # requests per protocol
CONCURRENCY = 8
SEED = 20261205
ERROR = f"{{{XMLNS}}}ErrorResponse"


@pytest.fixture
async def sqs(tmp_path, store_section):
    connector = aiohttp.TCPConnector(limit=CONCURRENCY)
    session = aiohttp.ClientSession(connector=connector)
    d = await start(tmp_path, store_section, session)
    yield d
    await d.daemon.shutdown(timeout_s=1)
    await session.close()


async def _targets(sqs: SqsDaemon) -> Targets:
    c = sqs.sqs
    urls, arns = [], []
    for name, attrs in (("fz", {}), ("fz.fifo", {"FifoQueue": "true"}), ("fz-dlq", {})):
        url = (await sqs.call(c.create_queue, QueueName=name, Attributes=attrs))["QueueUrl"]
        got = await sqs.call(c.get_queue_attributes, QueueUrl=url, AttributeNames=["QueueArn"])
        urls.append(url)
        arns.append(got["Attributes"]["QueueArn"])
    await sqs.call(c.send_message, QueueUrl=urls[0], MessageBody="hi")
    urls.append(urls[0].rsplit("/", 1)[0] + "/nope")
    return Targets(tuple(urls), tuple(arns))


def verdict(protocol: str, status: int, ctype: str, body: bytes) -> str | None:
    """What is wrong with an answer, or None."""
    if status >= 500:
        return "a 5xx"
    if b"Traceback" in body or b"Internal" in body:
        return "an internal error in the body"
    if protocol == "json":
        if ctype != JSON_TYPE:
            return f"content type {ctype}"
        try:
            doc = json.loads(body)
        except ValueError:
            return "not JSON"
        if not isinstance(doc, dict):
            return "not a JSON object"
        if status >= 400 and "#" not in str(doc.get("__type")):
            return "an error without __type"
        return None
    if ctype != "text/xml":
        return f"content type {ctype}"
    try:
        root = ET.fromstring(body)
    except ET.ParseError:
        return "not XML"
    if status >= 400:
        code = root.find(f"{{{XMLNS}}}Error/{{{XMLNS}}}Code")
        if root.tag != ERROR or code is None or not code.text:
            return "an error without ErrorResponse/Error/Code"
    elif not root.tag.endswith("Response") or root.tag == ERROR:
        return f"a {status} answered {root.tag}"
    return None


async def fuzz(sqs: SqsDaemon, protocol: str, requests: Iterator[Request]) -> list[str]:
    """Send every request, ``CONCURRENCY`` at a time; the failures, described."""
    failures: list[str] = []

    async def worker() -> None:
        for req in requests:  # shared: each worker takes the next one
            async with sqs.session.request(
                req.method,
                sqs.endpoint + req.path,
                # aiohttp warns of a large bytes body; a file-like one it sends alike
                data=io.BytesIO(req.body) if len(req.body) > 2**20 else req.body or None,
                headers=req.headers,
                timeout=aiohttp.ClientTimeout(total=30),
            ) as r:
                body = await r.read()
                wrong = verdict(protocol, r.status, r.content_type, body)
            if wrong:
                failures.append(f"{wrong}: {req.what}\n  -> {r.status} {body[:400]!r}")

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return failures


@pytest.mark.parametrize("protocol", ["json", "query"])
async def test_no_bad_request_breaks_the_sqs_endpoint(
    sqs: SqsDaemon, protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    inputs = Inputs(SEED, await _targets(sqs))
    make = inputs.json_request if protocol == "json" else inputs.query_request
    caplog.set_level(logging.ERROR, logger="ocd")
    started = time.monotonic()
    failures = await fuzz(sqs, protocol, (make() for _ in range(COUNT)))
    took = time.monotonic() - started
    logged = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert not failures, f"{len(failures)} of {COUNT} answers wrong:\n" + "\n".join(
        failures[: int(os.environ.get("OCD_SQS_FUZZ_SHOW", "8"))]
    )
    assert not logged, logged[:5]
    print(f"{protocol}: {COUNT} requests in {took:.1f} s")  # seen with -s
