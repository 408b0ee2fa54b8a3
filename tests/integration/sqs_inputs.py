"""Bad SQS requests, for both protocols, from a seeded ``random.Random``: the same seed
makes the same requests, so a failure found once is found again.

Each request starts from a valid one for an action (its members from ``shapes.REQUESTS``,
so every member of every action is reached) and is then broken: AWS JSON with wrong types
at any depth, unknown or missing members, deep nesting, huge values, non-UTF-8 and
non-JSON bodies; the Query protocol with keys too deep or too shallow, bad indexes,
duplicate keys, bad values and percent-escapes that are not UTF-8.

Nothing here may make the daemon wait: a valid positive ``WaitTimeSeconds`` (or a queue's
``ReceiveMessageWaitTimeSeconds``) would turn receives into long polls, so ``_no_wait``
takes it out of any request that would set one.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote_from_bytes

from ocd.http.sqs import shapes
from ocd.http.sqs.actions import ACTION_NAMES
from tests.integration.deep_json import Deep, dumps

JSON_TYPE = "application/x-amz-json-1.0"
FORM_TYPE = "application/x-www-form-urlencoded"
HUGE_EVERY = 200  # about one request in this many carries a value of ~300 KB
MAX_BODY = 2_200_000
WAITS = ("WaitTimeSeconds", "ReceiveMessageWaitTimeSeconds")


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str  # with its query string, if any
    headers: dict[str, str]
    body: bytes
    what: str  # for a failure message: the action and how the request was broken


@dataclass(frozen=True, slots=True)
class Targets:
    """What the requests name: existing queues' URLs and ARNs."""

    urls: tuple[str, ...]
    arns: tuple[str, ...]


WRONG: tuple[Any, ...] = (
    None, True, False, 0, -1, 1, 2**31, 2**63, -(2**63) - 1, 10**30, 1.5, -0.0, 1e308,
    "", "0", "5", "-1", "true", "All", "x", "\ud800", "\x00", "a" * 300, "é☃𝄞",
    [], [""], [1], [None], [[]], ["All", 5], {}, {"a": 1}, {"": ""}, {"a": {"b": "c"}},
    {"DataType": 1}, {"DataType": "String"}, {"DataType": "Number", "StringValue": "x"},
    {"DataType": "Binary", "BinaryValue": "!!"}, {"StringListValues": [1]},
)  # fmt: skip
RAW_JSON: tuple[bytes, ...] = (
    b"", b" ", b"{", b"}", b'{"a":}', b"\xff\xfe{}", b"\xef\xbb\xbf{}", b"null", b"[]",
    b'"s"', b"1", b"{}{}", b'{"a": NaN}', b'{"a": Infinity}', b'{"MaxResults": 1e999}',
    b'{"QueueUrl": "\\ud800"}', b"\x00", b'{"a": 1' + b"1" * 5000 + b"}", b"{\"a\":\"\xff\"}",
    b'{"QueueName": "a", "QueueName": 5}',
)  # fmt: skip
QUERY_VALUES: tuple[bytes, ...] = (
    b"", b"0", b"-1", b"99999999999999999999", b"1e3", b"5.0", b" 0", b"true", b"All",
    b"x", b"\xff", b"\xc3(", b"\x00", b"&=", b"%", b"a" * 300, "é☃𝄞".encode(), b"\xed\xa0\x80",
    b"String", b"Number", b"Binary", b"!!", b"String.x", b"Number.1",
)  # fmt: skip
INDEXES = ("0", "-1", "", "a", "1.5", "99999999999999999999", "11", "\u0661", " 1")
SUFFIXES = (".x", ".1", ".1.2", ".Name", ".Value.x", ".1.Key.x")
QUERY_PARTS = (
    "Attribute", "AttributeName", "MessageAttribute", "MessageAttributeName", "Tag", "TagKey",
    "Name", "Value", "Key", "StringValue", "BinaryValue", "StringListValue", "DataType",
    "SendMessageBatchRequestEntry", "Entries", "Id", "1", "2", "x", "",
)  # fmt: skip
# JSON member -> (query name, key field, value field) of maps; lists of names
_MAPS = {
    "Attributes": ("Attribute", "Name", "Value"),
    "tags": ("Tag", "Key", "Value"),
    "Tags": ("Tag", "Key", "Value"),
    "MessageAttributes": ("MessageAttribute", "Name", "Value"),
    "MessageSystemAttributes": ("MessageSystemAttribute", "Name", "Value"),
}
_LISTS = {
    "AttributeNames": "AttributeName",
    "MessageAttributeNames": "MessageAttributeName",
    "MessageSystemAttributeNames": "MessageSystemAttributeName",
    "TagKeys": "TagKey",
    "AWSAccountIds": "AWSAccountId",
    "Actions": "ActionName",
    "StringListValues": "StringListValue",
    "BinaryListValues": "BinaryListValue",
}


class Inputs:
    def __init__(self, seed: int, targets: Targets) -> None:
        self.rng = random.Random(seed)
        self.t = targets

    # ---------------------------------------------------------------- valid requests

    def _string(self, name: str) -> str:
        r, t = self.rng, self.t
        if name in ("QueueUrl",):
            return r.choice(t.urls)
        if name in ("SourceArn", "DestinationArn"):
            return r.choice(t.arns)
        if name == "QueueName":
            return r.choice(["fz", "fz.fifo", f"fz-new-{r.randrange(50)}", "q.fifo"])
        if name == "Id":
            return r.choice(["a", "b"])
        if name == "DataType":
            return r.choice(["String", "Number", "Binary", "String.x"])
        if name == "BinaryValue":
            return "aGk="
        if name in ("MessageGroupId", "MessageDeduplicationId"):
            return "g"
        return r.choice(["hi", "All", "1", "x"])

    def _valid(self, shape: shapes.Shape, name: str) -> Any:
        r = self.rng
        if shape == shapes.STRING:
            return self._string(name)
        if shape == shapes.INTEGER:
            return 0 if name in WAITS else r.choice([0, 1, 10])
        if isinstance(shape, shapes.List):
            return [self._valid(shape.item, name) for _ in range(r.randrange(1, 3))]
        if isinstance(shape, shapes.Map):
            if shape.value == shapes.STRING:
                key = r.choice(["VisibilityTimeout", "DelaySeconds", "FifoQueue", "team", "k"])
                return {key: r.choice(["0", "30", "true", "v"])}
            return {"a": {"DataType": "String", "StringValue": "v"}}
        assert isinstance(shape, dict)
        return {k: self._valid(v, k) for k, v in shape.items() if r.random() < 0.7 or k == "Id"}

    def valid(self, op: str) -> dict[str, Any]:
        out = self._valid(shapes.REQUESTS[op], op)
        assert isinstance(out, dict)
        if op == "DeleteQueue":  # the queues the other requests name stay
            base = self.t.urls[0].rsplit("/", 1)[0]
            out["QueueUrl"] = f"{base}/fz-new-{self.rng.randrange(50)}"
        return out

    # ---------------------------------------------------------------- AWS JSON

    def _wrong(self) -> Any:
        r = self.rng
        if r.random() < 0.05:
            return Deep(r.choice([50, 990, 1100, 20_000]), r.choice(["list", "dict"]))
        if r.randrange(HUGE_EVERY) == 0:
            return "x" * 300_000
        return r.choice(WRONG)

    def _mutate(self, body: Any) -> Any:
        """``body`` with one node replaced, a member added or dropped."""
        r = self.rng
        paths = _paths(body)
        at = r.choice(paths)
        node = _get(body, at)
        how = r.random()
        if isinstance(node, dict) and how < 0.2:
            return _put(
                body, at, {**node, r.choice(["x", "QueueUrl", "Entries", ""]): self._wrong()}
            )
        if isinstance(node, dict) and node and how < 0.3:
            key = r.choice(sorted(node))
            return _put(body, at, {k: v for k, v in node.items() if k != key})
        if isinstance(node, list) and how < 0.3:
            return _put(body, at, node * r.choice([2, 11, 101]))
        return _put(body, at, self._wrong()) if at else body

    def json_request(self) -> Request:
        r = self.rng
        op = r.choice(ACTION_NAMES) if r.random() < 0.97 else r.choice(["", "Nope", "sendMessage"])
        headers = {"Content-Type": JSON_TYPE, "X-Amz-Target": f"AmazonSQS.{op}"}
        if r.random() < 0.1:
            body = r.choice(RAW_JSON)
            return Request("POST", "/", headers, body, f"{op} raw {body[:60]!r}")
        value: Any = self.valid(op) if op in ACTION_NAMES else {}
        for _ in range(r.randrange(1, 4)):
            value = self._mutate(value)
        value = _no_wait(value)
        # past the listener's 2 MiB is answered alike however far past: no need to send more
        body = dumps(value)[:MAX_BODY]
        return Request("POST", "/", headers, body, f"{op} {_short(value)}")

    # ---------------------------------------------------------------- Query

    def _form(self, op: str, value: dict[str, Any]) -> list[tuple[str, bytes]]:
        out = [("Action", op.encode()), ("Version", b"2012-11-05")]
        entry = f"{op}RequestEntry"
        for name, v in value.items():
            if name == "Entries" and isinstance(v, list):
                for i, e in enumerate(v, 1):
                    out += [(f"{entry}.{i}.{k}", b) for k, b in _flat(e)]
            else:
                out += _flat({name: v})
        return out

    def _break_form(self, form: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
        r = self.rng
        # mostly a member: a broken Action or Version ends the request before its members
        whole = len(form) <= 2 or r.random() < 0.1
        i = r.randrange(len(form)) if whole else r.randrange(2, len(form))
        key, value = form[i]
        how = r.randrange(8) if whole else r.randrange(7)
        if how == 0:
            form[i] = (key + r.choice(SUFFIXES), value)
        elif how == 1:
            parts = key.split(".")
            numbered = [j for j, p in enumerate(parts) if p.isdigit()]
            if numbered:
                parts[r.choice(numbered)] = r.choice(INDEXES)
            form[i] = (".".join(parts), value)
        elif how == 2:
            form[i] = (".".join(p for p in key.split(".") if not p.isdigit()), value)
        elif how == 3:
            form.append((key, r.choice(QUERY_VALUES)))
        elif how == 4:
            big = b"x" * 300_000 if r.randrange(HUGE_EVERY) == 0 else r.choice(QUERY_VALUES)
            form[i] = (key, big)
        elif how == 5:
            depth = r.choice([1, 2, 3, 5, 9, 40])
            made = ".".join(r.choice(QUERY_PARTS) for _ in range(depth))
            form.append((made, r.choice(QUERY_VALUES)))
        elif how == 6 and key != "Action":
            del form[i]
        else:
            form[i] = ("Action", r.choice([b"", b"Nope", b"\xff", b"sendmessage", b"Send Message"]))
        return form

    def query_request(self) -> Request:
        r = self.rng
        op = r.choice(ACTION_NAMES)
        if r.random() < 0.03:
            body = r.choice([b"\xff\xfe", b"&&&", b"=", b"Action", b"Action=%", b"%zz=1"])
            return Request("POST", "/", {"Content-Type": FORM_TYPE}, body, f"raw {body!r}")
        form = self._form(op, _no_wait(self.valid(op)))
        for _ in range(r.randrange(1, 4)):
            form = self._break_form(form)
        form = [(k, b"0" if k in WAITS else v) for k, v in form]
        encoded = "&".join(
            f"{quote_from_bytes(k.encode('utf-8', 'surrogatepass'))}={quote_from_bytes(v)}"
            for k, v in form
        )
        what = f"{op} {_short(form)}"
        if len(encoded) < 2000 and r.random() < 0.1:
            return Request("GET", "/?" + encoded, {}, b"", "GET " + what)
        return Request("POST", "/", {"Content-Type": FORM_TYPE}, encoded.encode(), what)


def _flat(value: dict[str, Any], prefix: str = "") -> list[tuple[str, bytes]]:
    """A JSON request's members as Query form pairs, the way botocore names them."""
    out: list[tuple[str, bytes]] = []
    for name, v in value.items():
        if name in _MAPS and isinstance(v, dict):
            q, kf, vf = _MAPS[name]
            for i, (k, x) in enumerate(v.items(), 1):
                out.append((f"{prefix}{q}.{i}.{kf}", _bytes(k)))
                if isinstance(x, dict):
                    out += _flat(x, f"{prefix}{q}.{i}.{vf}.")
                else:
                    out.append((f"{prefix}{q}.{i}.{vf}", _bytes(x)))
        elif name in _LISTS and isinstance(v, list):
            out += [(f"{prefix}{_LISTS[name]}.{i}", _bytes(x)) for i, x in enumerate(v, 1)]
        else:
            out.append((prefix + name, _bytes(v)))
    return out


def _bytes(v: Any) -> bytes:
    return v.encode("utf-8", "surrogatepass") if isinstance(v, str) else json.dumps(v).encode()


def _no_wait(value: Any) -> Any:
    """``value`` without a wait that a receive would honour."""
    if isinstance(value, list):
        return [_no_wait(v) for v in value]
    if not isinstance(value, dict):
        return value
    return {k: 0 if k in WAITS and _waits(v) else _no_wait(v) for k, v in value.items()}


def _waits(v: Any) -> bool:
    try:
        return bool(int(v)) if not isinstance(v, (bool, Deep)) else False
    except (TypeError, ValueError, OverflowError):
        return False


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [at]
    if isinstance(value, dict):
        for k, v in value.items():
            found += _paths(v, (*at, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += _paths(v, (*at, i))
    return found


def _get(value: Any, at: tuple[Any, ...]) -> Any:
    for step in at:
        value = value[step]
    return value


def _put(value: Any, at: tuple[Any, ...], new: Any) -> Any:
    if not at:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[at[0]] = _put(value[at[0]], at[1:], new)
    return copy


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 300 else f"{text[:300]}… ({len(text)} chars)"
