"""``ocd queues …`` and ``ocd token new``: an operator's client for ocd's Queues REST API.

The commands mirror wrangler's ``queues`` CLI (same flags, same validation messages) but talk
to ``/client/v4`` on an ocd listener. Output is an aligned table or key/value block for
people; ``--json`` prints the API's ``result`` instead (for ``info``: the queue with its
``metrics`` added). Exit codes: 0 done, 1 the API refused or the daemon is unreachable,
2 usage.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
import sys
import time
from collections.abc import Callable
from typing import Any

from ocd import limits
from ocd.cli.client import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    TIMEOUT_S,
    ApiFailure,
    Client,
    CliError,
    quote,
)
from ocd.cli.output import emit, message_body, notes, pairs, secs, table, when

DEFAULT_URL = "http://127.0.0.1:8787"
POLL_S = 0.2  # how often a waiting redrive asks for its task's progress
DLQ_MAX_RETRIES = 4  # create --dlq: five deliveries, then the dead-letter queue (SQS's usual 5)
FIFO = ".fifo"
COMMANDS = ("queues", "token")


def _given(**fields: Any) -> dict[str, Any]:
    """The fields the user gave; the API's defaults apply to the rest."""
    return {k: v for k, v in fields.items() if v is not None}


# ---------------------------------------------------------------- parser


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    token = sub.add_parser("token", help="make API tokens")
    token_sub = token.add_subparsers(dest="action", required=True, metavar="ACTION")
    new = token_sub.add_parser("new", help="print a new bearer token and its config snippet")
    new.add_argument("--account", default="local", help="account id for the snippet")

    queues = sub.add_parser("queues", help="manage queues over ocd's REST API")
    _common(queues, suppress=False)
    q = queues.add_subparsers(dest="action", required=True, metavar="ACTION")

    def action(name: str, help: str, *, queue: bool = True) -> argparse.ArgumentParser:
        p = q.add_parser(name, help=help)
        _common(p, suppress=True)
        if queue:
            p.add_argument("name", metavar="NAME", help="queue name or id")
        return p

    action("list", "list queues", queue=False)
    create = action("create", "create a queue")
    _settings_flags(create)
    create.add_argument("--fifo", action="store_true", help="a FIFO queue: NAME.fifo")
    create.add_argument(
        "--dlq",
        action="store_true",
        help="also create its dead-letter queue NAME-dlq (NAME-dlq.fifo) and link them",
    )
    create.add_argument(
        "--max-retries",
        type=int,
        help=f"with --dlq: retries before a message is dead-lettered (default {DLQ_MAX_RETRIES})",
    )
    action("info", "show a queue's settings, backlog and consumers")
    action("attributes", "depth, in flight, delayed, dead-letter depth and oldest age")
    _settings_flags(action("update", "change a queue's settings"))
    delete = action("delete", "delete a queue and its messages")
    delete.add_argument(
        "--with-dlq", action="store_true", help="also delete its consumer's dead-letter queue"
    )
    action("pause-delivery", "stop delivering messages (they keep being accepted)")
    action("resume-delivery", "deliver messages again")
    purge = action("purge", "delete every message of a queue")
    purge.add_argument("--force", action="store_true", help="skip the confirmation")
    send = action("send", "send one message")
    send.add_argument("body", metavar="BODY", help="the body; JSON unless --content-type text")
    send.add_argument("--content-type", choices=["json", "text"], default="json")
    send.add_argument("--delay-secs", type=int, help="delay before it can be delivered")
    send.add_argument("--message-group-id", help="FIFO queues: the message's group (required)")
    send.add_argument(
        "--message-deduplication-id",
        help="FIFO queues: its deduplication id (required without content-based deduplication)",
    )
    pull = action("pull", "lease messages for an HTTP pull consumer")
    pull.add_argument("--batch-size", type=int, help="1..100 (default 5)")
    pull.add_argument("--visibility-timeout-ms", type=int, help="lease length")
    pull.add_argument("--wait-ms", type=int, help="wait this long for a message (long poll)")
    receive = action("receive", "long-poll for messages; prints each with its lease id")
    receive.add_argument("--wait", type=int, default=20, help="seconds to wait, 0..20 (20)")
    receive.add_argument("--max", type=int, default=10, help="messages at most, 1..100 (10)")
    receive.add_argument(
        "--visibility", type=int, help="seconds they stay leased (default: the consumer's)"
    )
    ack = action("ack", "acknowledge (or retry) pulled messages by lease id")
    ack.add_argument("acks", nargs="*", metavar="LEASE_ID", help="lease ids to acknowledge")
    ack.add_argument(
        "--retry",
        action="extend",
        nargs="+",
        default=[],
        metavar="LEASE_ID",
        help="lease ids to put back for another attempt (after the ones to acknowledge)",
    )
    ack.add_argument("--delay-secs", type=int, help="delay for the retried messages")
    redrive = action("redrive", "move a dead-letter queue's messages back (a move task)")
    redrive.add_argument(
        "--to", metavar="QUEUE", help="the queue to move to (default: the one it is the DLQ of)"
    )
    redrive.add_argument("--rate", type=int, help="at most N messages a second (1..10000)")
    redrive.add_argument(
        "--no-wait", action="store_true", help="start the task and return (it runs on in ocd)"
    )
    peek = action("peek", "show messages without leasing them")
    peek.add_argument("--batch-size", type=int, help="1..100 (default 1)")

    consumer = q.add_parser("consumer", help="manage a queue's HTTP pull consumer")
    kinds = consumer.add_subparsers(dest="kind", required=True, metavar="KIND")
    http = kinds.add_parser("http", help="HTTP pull consumers")
    ops = http.add_subparsers(dest="op", required=True, metavar="OP")
    add = ops.add_parser("add", help="attach an HTTP pull consumer")
    remove = ops.add_parser("remove", help="detach the HTTP pull consumer")
    for p in (add, remove):
        _common(p, suppress=True)
        p.add_argument("name", metavar="NAME", help="queue name or id")
    add.add_argument("--batch-size", type=int)
    add.add_argument("--message-retries", type=int)
    add.add_argument("--dead-letter-queue")
    add.add_argument("--visibility-timeout-secs", type=int)
    add.add_argument("--retry-delay-secs", type=int)


def _common(p: argparse.ArgumentParser, *, suppress: bool) -> None:
    """Accepted before and after the action; after it, only when given (SUPPRESS)."""

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    p.add_argument(
        "--url",
        default=default(os.environ.get("OCD_URL", DEFAULT_URL)),
        help=f"ocd's listener (default: $OCD_URL or {DEFAULT_URL})",
    )
    p.add_argument(
        "--account",
        default=default(os.environ.get("OCD_ACCOUNT", "local")),
        help="account id (default: $OCD_ACCOUNT or local); the token comes from $OCD_API_TOKEN",
    )
    p.add_argument(
        "--json", action="store_true", default=default(False), help="print the API's result"
    )


def _settings_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--delivery-delay-secs", type=int, help=f"{limits.DELAY_S.text}")
    p.add_argument("--message-retention-period-secs", type=int, help="60..1209600")
    p.add_argument(
        "--content-based-deduplication",
        action=argparse.BooleanOptionalAction,
        help="FIFO queues: deduplicate sends without an id by the SHA-256 of their body",
    )
    p.add_argument(
        "--deduplication-scope",
        choices=["queue", "message_group"],
        help="FIFO queues: a deduplication id is unique in the queue or in its group",
    )


def _ranged(flag: str, value: int | None, lo: int, hi: int) -> int | None:
    if value is not None and not lo <= value <= hi:
        raise CliError(
            f"error: Invalid {flag} value: {value}. Must be between {lo} and {hi}", EXIT_USAGE
        )
    return value


# ---------------------------------------------------------------- running


def run(args: argparse.Namespace) -> int:
    try:
        if args.command == "token":
            _token_new(args.account)
            return EXIT_OK
        client = Client(args.url, args.account, os.environ.get("OCD_API_TOKEN") or None)
        handler = _HANDLERS["consumer " + args.op if args.action == "consumer" else args.action]
        handler(client, args)
        return EXIT_OK
    except ApiFailure as e:
        print(e, file=sys.stderr)
        if 10000 in e.codes and not os.environ.get("OCD_API_TOKEN"):
            print(f"hint: set OCD_API_TOKEN to a token of account {args.account}", file=sys.stderr)
        return e.code
    except CliError as e:
        print(e, file=sys.stderr)
        return e.code
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def _token_new(account: str) -> None:
    token = secrets.token_urlsafe(32)
    digest = hashlib.sha256(token.encode()).hexdigest()
    print(f"token:  {token}")
    print(f"sha256: {digest}")
    print()
    print("Add to ocd's config file (only the hash is stored there):")
    print()
    print("[[accounts]]")
    print(f"id = {json.dumps(account)}")
    print(f'token_sha256 = ["{digest}"]')
    print()
    print("Then use the token:")
    print(f"  export OCD_API_TOKEN={token}")
    print(f"  ocd queues --account {account} list")


# ---------------------------------------------------------------- queues


def _list(c: Client, args: argparse.Namespace) -> None:
    queues: list[dict[str, Any]] = []
    page = 1
    while True:
        env = c.call("GET", f"?per_page=1000&page={page}")
        queues += env["result"]
        if page >= (env.get("result_info") or {}).get("total_pages", 1):
            break
        page += 1
    rows = [
        [
            q["queue_name"],
            q["queue_id"],
            q["created_on"],
            q["modified_on"],
            str(q["producers_total_count"]),
            str(q["consumers_total_count"]),
            "paused" if q["settings"]["delivery_paused"] else "active",
        ]
        for q in queues
    ]
    headers = ["NAME", "ID", "CREATED", "MODIFIED", "PRODUCERS", "CONSUMERS", "DELIVERY"]
    emit(args.json, queues, lambda: print(table(headers, rows) if rows else "No queues."))


def _settings_body(args: argparse.Namespace) -> dict[str, Any]:
    delay = _ranged("--delivery-delay-secs", args.delivery_delay_secs, *limits.DELAY_S)
    retention = _ranged(
        "--message-retention-period-secs", args.message_retention_period_secs, *limits.RETENTION_S
    )
    return _given(
        delivery_delay=delay,
        message_retention_period=retention,
        content_based_deduplication=args.content_based_deduplication,
        deduplication_scope=args.deduplication_scope,
    )


def _create(c: Client, args: argparse.Namespace) -> None:
    name = args.name
    if args.fifo and not name.endswith(FIFO):
        name += FIFO
    if args.max_retries is not None and not args.dlq:
        raise CliError("error: --max-retries applies with --dlq", EXIT_USAGE)
    retries = _ranged("--max-retries", args.max_retries, 0, 100)
    body: dict[str, Any] = {"queue_name": name}
    settings = _settings_body(args)
    if settings:
        body["settings"] = settings
    if not args.dlq:
        q = c.call("POST", "", body)["result"]
        emit(args.json, q, lambda: print(f"Created queue {q['queue_name']} (id {q['queue_id']})."))
        return
    base = name.removesuffix(FIFO)
    dlq_name = base + "-dlq" + (FIFO if name.endswith(FIFO) else "")
    dlq_body: dict[str, Any] = {"queue_name": dlq_name}
    if name.endswith(FIFO) and "deduplication_scope" in settings:
        dlq_body["settings"] = {"deduplication_scope": settings["deduplication_scope"]}
    dq = c.call("POST", "", dlq_body)["result"]
    q = c.call("POST", "", body)["result"]
    max_retries = DLQ_MAX_RETRIES if retries is None else retries
    con = c.call(
        "POST",
        f"/{quote(q['queue_id'])}/consumers",
        {
            "type": "http_pull",
            "dead_letter_queue": dlq_name,
            "settings": {"max_retries": max_retries},
        },
    )["result"]

    def human() -> None:
        print(f"Created queue {q['queue_name']} (id {q['queue_id']}).")
        print(f"Created its dead-letter queue {dq['queue_name']} (id {dq['queue_id']}).")
        print(
            f"Linked them: a message is dead-lettered after {max_retries + 1} deliveries; "
            f"receive with: ocd queues receive {q['queue_name']}"
        )

    emit(args.json, {"queue": q, "dead_letter_queue": dq, "consumer": con}, human)


def _update(c: Client, args: argparse.Namespace) -> None:
    settings = _settings_body(args)
    if not settings:
        raise CliError(
            "error: nothing to update: give --delivery-delay-secs, "
            "--message-retention-period-secs, --[no-]content-based-deduplication or "
            "--deduplication-scope",
            EXIT_USAGE,
        )
    q = c.call("PATCH", f"/{quote(args.name)}", {"settings": settings})["result"]
    emit(args.json, q, lambda: print(f"Updated queue {q['queue_name']}: {_settings_line(q)}."))


def _settings_line(q: dict[str, Any]) -> str:
    s = q["settings"]
    line = (
        f"delivery delay {secs(s['delivery_delay'])}, "
        f"retention {secs(s['message_retention_period'])}"
    )
    if "deduplication_scope" in s:  # a FIFO queue
        line += f", deduplication {_deduplication(s)}"
    return line


def _deduplication(s: dict[str, Any]) -> str:
    """A FIFO queue's deduplication settings in words."""
    how = "content-based or by id" if s["content_based_deduplication"] else "by id"
    scope = "per message group" if s["deduplication_scope"] == "message_group" else "per queue"
    return f"{how}, {scope}"


def _pause(c: Client, args: argparse.Namespace, paused: bool) -> None:
    body = {"settings": {"delivery_paused": paused}}
    q = c.call("PATCH", f"/{quote(args.name)}", body)["result"]
    verb = "Paused" if paused else "Resumed"
    emit(args.json, q, lambda: print(f"{verb} delivery for queue {q['queue_name']}."))


def _delete(c: Client, args: argparse.Namespace) -> None:
    dlq = None
    if args.with_dlq:
        q = c.call("GET", f"/{quote(args.name)}")["result"]
        dlq = next((x["dead_letter_queue"] for x in q["consumers"] if x["dead_letter_queue"]), None)
        if dlq is None:
            raise CliError(f"error: queue {args.name} has no dead-letter queue; nothing deleted")
    result = c.call("DELETE", f"/{quote(args.name)}")["result"]
    if dlq is None:
        emit(args.json, result, lambda: print(f"Deleted queue {args.name}."))
        return
    c.call("DELETE", f"/{quote(dlq)}")

    def human() -> None:
        print(f"Deleted queue {args.name} and its dead-letter queue {dlq}.")

    emit(args.json, {"deleted": [args.name, dlq]}, human)


def _purge(c: Client, args: argparse.Namespace) -> None:
    if not args.force:
        if not sys.stdin.isatty():
            raise CliError(
                f"error: purging deletes every message of {args.name}; "
                "pass --force to do it without a terminal to confirm on",
                EXIT_USAGE,
            )
        print(
            f"This permanently deletes every message of queue {args.name}. "
            f"Type {args.name} to proceed: ",
            end="",
            file=sys.stderr,
            flush=True,
        )
        if sys.stdin.readline().strip() != args.name:
            raise CliError("error: purge cancelled: the name did not match")
    q = c.call("POST", f"/{quote(args.name)}/purge", {"delete_messages_permanently": True})
    emit(args.json, q["result"], lambda: print(f"Purged queue {args.name}."))


def _info(c: Client, args: argparse.Namespace) -> None:
    q = c.call("GET", f"/{quote(args.name)}")["result"]
    m = c.call("GET", f"/{quote(q['queue_id'])}/metrics")["result"]
    emit(args.json, {**q, "metrics": m}, lambda: _print_info(c, q, m))


def _attributes(c: Client, args: argparse.Namespace) -> None:
    q = c.call("GET", f"/{quote(args.name)}")["result"]
    m = c.call("GET", f"/{quote(q['queue_id'])}/metrics")["result"]
    dlq = next((x["dead_letter_queue"] for x in q["consumers"] if x["dead_letter_queue"]), None)
    dlq_depth = None
    if dlq is not None:
        try:
            dlq_depth = c.call("GET", f"/{quote(dlq)}/metrics")["result"]["backlog_count"]
        except ApiFailure as e:
            if 11000 not in e.codes:  # not made yet: Cloudflare makes it at the first dead letter
                raise
            dlq_depth = 0
    oldest = m["oldest_message_timestamp_ms"]
    age = max(0, int(time.time() * 1000) - oldest) if oldest else None
    attrs = {
        "queue": q["queue_name"],
        "depth": m.get("ready_count", m["backlog_count"]),
        "in_flight": m.get("inflight_count"),
        "delayed": m.get("delayed_count"),
        "backlog": m["backlog_count"],
        "dead_letter_queue": dlq,
        "dead_letter_depth": dlq_depth,
        "oldest_age_ms": age,
    }

    def human() -> None:
        rows = [
            ("Queue", q["queue_name"]),
            ("Depth", f"{attrs['depth']} ready"),
            ("In flight", str(attrs["in_flight"])),
            ("Delayed", str(attrs["delayed"])),
            ("Dead letter queue", f"{dlq} ({dlq_depth} message(s))" if dlq else "none"),
            ("Oldest message", "none" if age is None else f"{secs(age // 1000)} old"),
        ]
        print(pairs(rows))

    emit(args.json, attrs, human)


def _print_info(c: Client, q: dict[str, Any], m: dict[str, Any]) -> None:
    s = q["settings"]
    producers = ", ".join(f"{p['type']} {p.get('script') or '?'}" for p in q["producers"])
    rows = [
        ("Queue", q["queue_name"]),
        ("ID", q["queue_id"]),
        ("Created", q["created_on"]),
        ("Modified", q["modified_on"]),
        ("Delivery", "paused" if s["delivery_paused"] else "active"),
        ("Delivery delay", secs(s["delivery_delay"])),
        ("Retention period", secs(s["message_retention_period"])),
        *(
            [("Type", "FIFO"), ("Deduplication", _deduplication(s))]
            if "deduplication_scope" in s
            else []
        ),
        ("Backlog", f"{m['backlog_count']} message(s), {m['backlog_bytes']} bytes"),
        ("Oldest message", when(m["oldest_message_timestamp_ms"])),
        ("Producers", producers or "none"),
        ("Consumers", str(q["consumers_total_count"]) if q["consumers"] else "none"),
    ]
    print(pairs(rows))
    for con in q["consumers"]:
        print()
        print(_consumer_block(c, q, con))


def _consumer_block(c: Client, q: dict[str, Any], con: dict[str, Any]) -> str:
    s = con["settings"]
    name = f" {con['script_name']}" if con.get("script_name") else ""
    rows = [
        ("Batch size", str(s["batch_size"])),
        ("Max retries", str(s["max_retries"])),
        ("Retry delay", secs(s["retry_delay"])),
        ("Dead letter queue", con["dead_letter_queue"] or "none"),
    ]
    if con["type"] == "http_pull":
        rows.append(("Visibility timeout", f"{s['visibility_timeout_ms']} ms"))
    else:
        rows.append(("Max wait time", f"{s['max_wait_time_ms']} ms"))
        rows.append(("Max concurrency", str(s["max_concurrency"] or "auto")))
    lines = [f"Consumer: {con['type']}{name} (id {con['consumer_id']})", pairs(rows, "  ")]
    if con["type"] == "http_pull":
        pull = {"batch_size": s["batch_size"], "visibility_timeout_ms": s["visibility_timeout_ms"]}
        lines += [
            f"  Pull messages with: ocd queues pull {q['queue_name']}",
            "  or over HTTP:",
            f"    curl -X POST {c.api_url('/' + q['queue_id'])}/messages/pull \\",
            '      -H "Authorization: Bearer $OCD_API_TOKEN" \\',
            f"      -H 'Content-Type: application/json' -d '{json.dumps(pull)}'",
        ]
    return "\n".join(lines)


# ---------------------------------------------------------------- messages


def _send(c: Client, args: argparse.Namespace) -> None:
    body: Any = args.body
    if args.content_type == "json":
        try:
            body = json.loads(args.body)
        except ValueError as e:
            raise CliError(
                f"error: BODY is not valid JSON ({e}); use --content-type text to send it as text",
                EXIT_USAGE,
            ) from None
    msg = _given(
        body=body,
        content_type=args.content_type,
        delay_seconds=args.delay_secs,
        message_group_id=args.message_group_id,
        message_deduplication_id=args.message_deduplication_id,
    )
    result = c.call("POST", f"/{quote(args.name)}/messages", msg)["result"]
    backlog = result["metadata"]["metrics"]["backlog_count"]
    emit(args.json, result, lambda: print(f"Sent 1 message to {args.name} (backlog {backlog})."))


class _FifoColumns:
    """GROUP and SEQ columns of a pull or peek table, when its messages are a FIFO queue's."""

    def __init__(self, shown: bool) -> None:
        self.headers = ["GROUP", "SEQ"] if shown else []

    def cells(self, msg: dict[str, Any]) -> list[str]:
        if not self.headers:
            return []
        return [str(msg.get("message_group_id", "")), str(msg.get("sequence_number", ""))]


def _fifo_columns(messages: list[dict[str, Any]]) -> _FifoColumns:
    return _FifoColumns(any("message_group_id" in m for m in messages))


def _pull(c: Client, args: argparse.Namespace) -> None:
    req = _given(
        batch_size=args.batch_size,
        visibility_timeout_ms=args.visibility_timeout_ms,
        wait_ms=args.wait_ms,
    )
    wait_s = (args.wait_ms or 0) / 1000
    env = c.call("POST", f"/{quote(args.name)}/messages/pull", req, TIMEOUT_S + wait_s)
    notes(env)
    result = env["result"]
    fifo = _fifo_columns(result["messages"])
    rows = [
        [
            msg["id"],
            str(msg["attempts"]),
            *fifo.cells(msg),
            msg["metadata"].get("CF-Content-Type", "?"),
            message_body(msg),
            msg["lease_id"],
        ]
        for msg in result["messages"]
    ]

    def human() -> None:
        if rows:
            print(table(["ID", "ATTEMPTS", *fifo.headers, "TYPE", "BODY", "LEASE ID"], rows))
        else:
            print("No messages available.")
        print(f"\nBacklog: {result['message_backlog_count']} message(s).")

    emit(args.json, result, human)


def _receive(c: Client, args: argparse.Namespace) -> None:
    wait = _ranged("--wait", args.wait, 0, 20)
    most = _ranged("--max", args.max, 1, 100)
    visibility = _ranged("--visibility", args.visibility, *limits.VISIBILITY_S)
    req = _given(
        batch_size=most,
        visibility_timeout_ms=None if visibility is None else visibility * 1000,
        wait_ms=(wait or 0) * 1000,
    )
    env = c.call("POST", f"/{quote(args.name)}/messages/pull", req, TIMEOUT_S + (wait or 0))
    notes(env)
    result = env["result"]

    def human() -> None:
        if not result["messages"]:
            print("No messages.")
            return
        for i, msg in enumerate(result["messages"]):
            if i:
                print()
            rows = [
                ("Lease id", msg["lease_id"]),
                ("Message id", msg["id"]),
                ("Attempts", str(msg["attempts"])),
                ("Sent", when(msg["timestamp_ms"])),
                *([("Group", str(msg["message_group_id"]))] if "message_group_id" in msg else []),
                ("Body", message_body(msg)),
            ]
            print(pairs(rows))
        print(f"\nAck with: ocd queues ack {args.name} LEASE_ID...")

    emit(args.json, result, human)


def _ack(c: Client, args: argparse.Namespace) -> None:
    if not args.acks and not args.retry:
        raise CliError("error: give lease ids to acknowledge, or --retry LEASE_ID", EXIT_USAGE)
    if args.delay_secs is not None and not args.retry:
        raise CliError("error: --delay-secs applies to --retry lease ids; none given", EXIT_USAGE)
    retries = [_given(lease_id=lease, delay_seconds=args.delay_secs) for lease in args.retry]
    body = {"acks": [{"lease_id": a} for a in args.acks], "retries": retries}
    result = c.call("POST", f"/{quote(args.name)}/messages/ack", body)["result"]
    for lease, warning in (result.get("warnings") or {}).items():
        print(f"warning: {lease}: {warning}", file=sys.stderr)
    summary = f"Acknowledged {result['ackCount']}, retried {result['retryCount']} message(s)."
    emit(args.json, result, lambda: print(summary))


def _peek(c: Client, args: argparse.Namespace) -> None:
    req = _given(batch_size=args.batch_size)
    result = c.call("POST", f"/{quote(args.name)}/messages/peek", req)["result"]
    fifo = _fifo_columns(result["messages"])
    rows = [
        [
            msg["id"],
            str(msg["attempts"]),
            *fifo.cells(msg),
            when(msg["timestamp_ms"]),
            msg["metadata"].get("CF-Content-Type", "?"),
            message_body(msg),
        ]
        for msg in result["messages"]
    ]
    headers = ["ID", "ATTEMPTS", *fifo.headers, "SENT", "TYPE", "BODY"]
    emit(
        args.json, result, lambda: print(table(headers, rows) if rows else "No messages available.")
    )


def _redrive(c: Client, args: argparse.Namespace) -> None:
    rate = _ranged("--rate", args.rate, 1, 10_000)
    body = _given(action="redrive", destination=args.to, rate=rate)
    task = c.call("POST", f"/{quote(args.name)}/messages/move", body)["result"]
    if not args.no_wait:
        try:
            while task["state"] in ("running", "cancelling"):
                time.sleep(POLL_S)  # the pace of a progress poll, not synchronisation
                task = c.call("GET", f"/{quote(task['id'])}", under="/move_tasks")["result"]
        except KeyboardInterrupt:
            print(
                f"\nThe task goes on in ocd; cancel it with: curl -X POST "
                f"{c.api_url('/' + task['id'] + '/cancel', '/move_tasks')}",
                file=sys.stderr,
            )
            raise

    def human() -> None:
        where = f"{task['queue']} to {task['destination']}"
        if task["state"] in ("running", "cancelling"):
            print(
                f"Started redrive task {task['id']} from {where}: up to {task['total']} message(s)."
            )
            return
        line = f"Redrive {task['id']} from {where} {task['state']}: moved {task['done']} of "
        print(line + f"{task['total']} message(s).")
        if task.get("error"):
            print(f"error: {task['error']}", file=sys.stderr)

    emit(args.json, task, human)
    if task["state"] == "failed":
        raise CliError(f"error: the redrive failed: {task.get('error')}")


# ---------------------------------------------------------------- consumers


def _consumer_add(c: Client, args: argparse.Namespace) -> None:
    timeout = _ranged(
        "--visibility-timeout-secs", args.visibility_timeout_secs, *limits.VISIBILITY_S
    )
    settings = _given(
        batch_size=args.batch_size,
        max_retries=args.message_retries,
        visibility_timeout_ms=None if timeout is None else timeout * 1000,
        retry_delay=args.retry_delay_secs,
    )
    body = _given(type="http_pull", settings=settings, dead_letter_queue=args.dead_letter_queue)
    con = c.call("POST", f"/{quote(args.name)}/consumers", body)["result"]

    def human() -> None:
        print(f"Added an HTTP pull consumer to queue {args.name} (id {con['consumer_id']}).")
        print(f"Pull messages with: ocd queues pull {args.name}")

    emit(args.json, con, human)


def _consumer_remove(c: Client, args: argparse.Namespace) -> None:
    consumers = c.call("GET", f"/{quote(args.name)}/consumers")["result"]
    if not consumers:
        raise CliError(f"error: queue {args.name} has no consumer")
    con = consumers[0]
    result = c.call("DELETE", f"/{quote(args.name)}/consumers/{quote(con['consumer_id'])}")
    emit(
        args.json,
        result["result"],
        lambda: print(f"Removed the {con['type']} consumer from queue {args.name}."),
    )


_HANDLERS: dict[str, Callable[[Client, argparse.Namespace], None]] = {
    "list": _list,
    "create": _create,
    "info": _info,
    "update": _update,
    "delete": _delete,
    "pause-delivery": lambda c, a: _pause(c, a, True),
    "resume-delivery": lambda c, a: _pause(c, a, False),
    "purge": _purge,
    "send": _send,
    "pull": _pull,
    "ack": _ack,
    "peek": _peek,
    "receive": _receive,
    "attributes": _attributes,
    "redrive": _redrive,
    "consumer add": _consumer_add,
    "consumer remove": _consumer_remove,
}
