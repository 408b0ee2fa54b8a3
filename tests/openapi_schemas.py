"""ocd's OpenAPI document as JSON schemas the tests can validate requests and responses with."""

from __future__ import annotations

from typing import Any

from openapi_schema_validator import OAS31Validator

from ocd.http.cloudflare.openapi import document

DOC = document()


def _resolve(node: Any, closed: bool) -> Any:
    """``node`` with every ``$ref`` inlined (ocd's components are not recursive); with
    ``closed``, objects also refuse properties the document does not name."""
    if isinstance(node, list):
        return [_resolve(v, closed) for v in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target: Any = DOC
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        return _resolve(target, closed)
    out = {k: _resolve(v, closed) for k, v in node.items()}
    if closed and "properties" in node and "additionalProperties" not in node:
        out["additionalProperties"] = False
    return out


def operation(method: str, template: str) -> dict[str, Any]:
    op: dict[str, Any] = DOC["paths"][template][method.lower()]
    return op


def request_validator(method: str, template: str) -> OAS31Validator | None:
    body = operation(method, template).get("requestBody")
    if body is None:
        return None
    return OAS31Validator(_resolve(body["content"]["application/json"]["schema"], False))


def response_validator(method: str, template: str, status: int) -> OAS31Validator | None:
    """Validates a response strictly: a field the document does not list is an error, so
    the document cannot fall behind what the handlers send."""
    response = operation(method, template)["responses"].get(str(status))
    if response is None:
        return None
    if "$ref" in response:  # a shared entry of components/responses
        response = _resolve(response, False)
    return OAS31Validator(_resolve(response["content"]["application/json"]["schema"], True))


def problems(validator: OAS31Validator, instance: Any) -> list[str]:
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message[:300]}"
        for e in validator.iter_errors(instance)
    ]
