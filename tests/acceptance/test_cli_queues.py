"""``ocd queues`` and ``ocd token`` as an operator runs them, against a real daemon."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
from pathlib import Path
from typing import Any

from tests.acceptance.conftest import recorder_config, run_ocd
from tests.helpers import free_port

WORKER_CONSUMER = """
[[workers.queues.consumers]]
queue = "jobs"
max_batch_timeout = 0
"""

_CLIENT_ENV = ("OCD_URL", "OCD_ACCOUNT", "OCD_API_TOKEN")


def cli(*args: str, env: dict[str, str] | None = None, stdin: Any = subprocess.DEVNULL):
    """Run ``ocd ARGS`` with only the client settings the test gives."""
    base = {k: v for k, v in os.environ.items() if k not in _CLIENT_ENV}
    return run_ocd(*args, env={**base, **(env or {})}, stdin=stdin)


class Ocd:
    """``ocd queues`` pointed (via $OCD_URL) at one running daemon."""

    def __init__(self, port: int, **env: str) -> None:
        self.env = {"OCD_URL": f"http://127.0.0.1:{port}", **env}

    def __call__(self, *args: str, code: int = 0, **kw: Any) -> subprocess.CompletedProcess[str]:
        r = cli("queues", *args, env=self.env, **kw)
        assert r.returncode == code, f"ocd queues {' '.join(args)}: {r.returncode}\n{r.stderr}"
        assert "Traceback" not in r.stderr
        return r

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "--json").stdout)


def table(text: str) -> list[dict[str, str]]:
    """Rows of the aligned table that starts ``text``, as dicts keyed by its headers (cells
    hold no double space; a blank line ends the table)."""
    header, *lines = text.split("\n\n")[0].strip().splitlines()
    keys = re.split(r" {2,}", header)
    return [dict(zip(keys, re.split(r" {2,}", line), strict=True)) for line in lines]


def pairs(text: str) -> dict[str, str]:
    """``Label:  value`` lines of ``info`` as a dict."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = re.fullmatch(r"\s*([A-Z][A-Za-z ]+):\s+(.*)", line)
        if m:
            out.setdefault(m[1], m[2])
    return out


def start(ocd_processes, tmp_path: Path, consumers: str = "") -> Ocd:
    return Ocd(ocd_processes(recorder_config(tmp_path, consumers)).wait_started())


def test_queue_lifecycle_create_list_info_update_pause_resume_delete(ocd_processes, tmp_path):
    ocd = start(ocd_processes, tmp_path, WORKER_CONSUMER)

    r = ocd("create", "orders", "--delivery-delay-secs", "5")
    assert re.fullmatch(r"Created queue orders \(id [0-9a-f]{32}\)\.\n", r.stdout)
    created = ocd.json("create", "audit", "--message-retention-period-secs", "3600")
    assert created["queue_name"] == "audit"
    assert created["settings"] == {
        "delivery_delay": 0,
        "delivery_paused": False,
        "message_retention_period": 3600,
    }

    rows = {row["NAME"]: row for row in table(ocd("list").stdout)}
    assert set(rows) == {"audit", "jobs", "orders"}  # jobs: named by the config's worker
    assert rows["jobs"]["PRODUCERS"] == "1" and rows["jobs"]["CONSUMERS"] == "1"
    assert rows["audit"]["ID"] == created["queue_id"]
    assert rows["orders"]["DELIVERY"] == "active"
    # --json works before and after the action, and prints the API's result.
    listed = ocd.json("list")
    assert listed == json.loads(ocd("--json", "list").stdout)
    assert [q["queue_name"] for q in listed] == ["audit", "jobs", "orders"]

    info = pairs(ocd("info", "orders").stdout)
    assert info["Queue"] == "orders"
    assert info["Delivery delay"] == "5s"
    assert info["Retention period"] == "345600s (4d)"
    assert info["Backlog"] == "0 message(s), 0 bytes"
    assert info["Consumers"] == "none"
    jobs = ocd("info", "jobs").stdout
    assert pairs(jobs)["Producers"] == "worker app"
    assert "Consumer: worker app (id " in jobs
    assert "Max wait time:" in jobs and "Pull messages with" not in jobs
    assert ocd.json("info", "jobs")["metrics"]["backlog_count"] == 0

    r = ocd(
        "update", "orders", "--delivery-delay-secs", "0", "--message-retention-period-secs", "86400"
    )
    assert r.stdout == "Updated queue orders: delivery delay 0s, retention 86400s (1d).\n"
    assert ocd.json("info", "orders")["settings"]["message_retention_period"] == 86400

    assert ocd("pause-delivery", "orders").stdout == "Paused delivery for queue orders.\n"
    assert pairs(ocd("info", "orders").stdout)["Delivery"] == "paused"
    assert {r["NAME"]: r["DELIVERY"] for r in table(ocd("list").stdout)}["orders"] == "paused"
    assert ocd.json("resume-delivery", "orders")["settings"]["delivery_paused"] is False

    assert ocd("delete", "orders").stdout == "Deleted queue orders.\n"
    assert [q["queue_name"] for q in ocd.json("list")] == ["audit", "jobs"]

    # The API's refusals: its code and message on stderr, exit 1, nothing on stdout.
    r = ocd("info", "orders", code=1)
    assert r.stderr == "error 11000: Queue not found: orders\n" and r.stdout == ""
    assert ocd("create", "audit", code=1).stderr == (
        "error 11009: A queue named audit already exists\n"
    )
    assert ocd("delete", "jobs", code=1).stderr.startswith(
        "error 11006: queue jobs cannot be deleted: "
    )
    assert "error 11004: queue jobs already has a consumer" in (
        ocd("consumer", "http", "add", "jobs", code=1).stderr
    )
    assert "error 11006: the consumer of jobs is worker app in ocd's config file" in (
        ocd("consumer", "http", "remove", "jobs", code=1).stderr
    )
    assert ocd("list").stdout.count("\n") == 3  # header + audit + jobs: nothing changed


def test_messages_through_an_http_pull_consumer(ocd_processes, tmp_path):
    ocd = start(ocd_processes, tmp_path)
    ocd("create", "tasks")
    assert ocd("send", "tasks", '{"n": 1}').stdout == "Sent 1 message to tasks (backlog 1).\n"
    sent = ocd.json("send", "tasks", "hello there", "--content-type", "text")
    assert sent["metadata"]["metrics"]["backlog_count"] == 2
    ocd("send", "tasks", "[1, 2]", "--delay-secs", "3600")  # not visible for an hour

    r = ocd("pull", "tasks", code=1)
    assert r.stderr == (
        "error 11010: queue tasks has no HTTP pull consumer; add one first "
        "(ocd queues consumer http add tasks)\n"
    )
    r = ocd(
        "consumer", "http", "add", "tasks", "--batch-size", "20", "--message-retries", "2",
        "--visibility-timeout-secs", "60", "--dead-letter-queue", "tasks-dlq",
    )  # fmt: skip
    assert r.stdout.startswith("Added an HTTP pull consumer to queue tasks (id ")
    info = ocd("info", "tasks").stdout
    fields = pairs(info)
    assert fields["Backlog"].startswith("3 message(s), ")
    assert fields["Batch size"] == "20" and fields["Max retries"] == "2"
    assert fields["Dead letter queue"] == "tasks-dlq"
    assert fields["Visibility timeout"] == "60000 ms"
    assert "Pull messages with: ocd queues pull tasks" in info
    assert "/messages/pull" in info and "Authorization: Bearer $OCD_API_TOKEN" in info
    assert "tasks-dlq" in ocd("list").stdout  # created with the consumer, like Cloudflare

    peeked = table(ocd("peek", "tasks", "--batch-size", "10").stdout)
    assert [(p["TYPE"], p["BODY"], p["ATTEMPTS"]) for p in peeked] == [
        ("json", '{"n": 1}', "0"),
        ("text", "hello there", "0"),
    ]

    out = ocd("pull", "tasks", "--visibility-timeout-ms", "60000").stdout
    assert re.search(r"\n\nBacklog: \d+ message\(s\)\.\n\Z", out)
    pulled = table(out)
    assert [(p["BODY"], p["ATTEMPTS"]) for p in pulled] == [('{"n": 1}', "1"), ("hello there", "1")]
    assert [p["ID"] for p in pulled] == [p["ID"] for p in peeked]
    # Leased: a second pull gets nothing, and says so.
    assert ocd("pull", "tasks").stdout.startswith("No messages available.\n")

    # Ack the JSON message, retry the text one; the retry comes straight back.
    json_lease, text_lease = (p["LEASE ID"] for p in pulled)
    r = ocd("ack", "tasks", json_lease, "--retry", text_lease)
    assert r.stdout == "Acknowledged 1, retried 1 message(s).\n" and r.stderr == ""
    again = ocd.json("pull", "tasks", "--wait-ms", "5000")
    assert [m["attempts"] for m in again["messages"]] == [2]
    assert again["messages"][0]["metadata"]["CF-Content-Type"] == "text"
    assert again["messages"][0]["body"] == "hello there"  # --json: the API's result as is
    acked = ocd.json("ack", "tasks", again["messages"][0]["lease_id"])
    assert acked == {"ackCount": 1, "retryCount": 0, "warnings": {}}
    r = ocd("ack", "tasks", "not-a-lease")
    assert r.stderr == "warning: not-a-lease: invalid lease id: not issued for this queue\n"
    assert ocd("peek", "tasks").stdout == "No messages available.\n"

    ocd("pause-delivery", "tasks")
    assert ocd("pull", "tasks", code=1).stderr == "error 10252: queue_delivery_paused\n"
    ocd("resume-delivery", "tasks")

    assert ocd("purge", "tasks", "--force").stdout == "Purged queue tasks.\n"
    assert ocd.json("info", "tasks")["metrics"]["backlog_count"] == 0  # the delayed one too
    r = ocd("consumer", "http", "remove", "tasks")
    assert r.stdout == "Removed the http_pull consumer from queue tasks.\n"
    assert pairs(ocd("info", "tasks").stdout)["Consumers"] == "none"
    ocd("pull", "tasks", code=1)


def test_purge_without_force_asks_on_a_terminal_and_refuses_without_one(ocd_processes, tmp_path):
    ocd = start(ocd_processes, tmp_path)
    ocd("create", "logs")
    ocd("send", "logs", '"x"')

    r = ocd("purge", "logs", code=2)  # stdin is not a terminal
    assert r.stderr == (
        "error: purging deletes every message of logs; "
        "pass --force to do it without a terminal to confirm on\n"
    )

    def purge_typing(answer: bytes) -> subprocess.CompletedProcess[str]:
        leader, follower = pty.openpty()
        try:
            os.write(leader, answer)
            return cli("queues", "purge", "logs", env=ocd.env, stdin=follower)
        finally:
            os.close(follower)
            os.close(leader)

    r = purge_typing(b"log\n")
    assert r.returncode == 1
    assert "Type logs to proceed" in r.stderr
    assert r.stderr.endswith("error: purge cancelled: the name did not match\n")
    assert pairs(ocd("info", "logs").stdout)["Backlog"].startswith("1 message(s)")

    r = purge_typing(b"logs\n")
    assert r.returncode == 0 and r.stdout == "Purged queue logs.\n"
    assert pairs(ocd("info", "logs").stdout)["Backlog"] == "0 message(s), 0 bytes"


def test_usage_errors_are_caught_before_any_request():
    # Nothing listens on this port: every line below fails before reaching for it.
    ocd = Ocd(free_port())
    cases = {
        ("create", "q", "--delivery-delay-secs", "86401"):
            "Invalid --delivery-delay-secs value: 86401. Must be between 0 and 86400",
        ("create", "q", "--message-retention-period-secs", "59"):
            "Invalid --message-retention-period-secs value: 59. Must be between 60 and 1209600",
        ("update", "q", "--delivery-delay-secs", "-1"):
            "Invalid --delivery-delay-secs value: -1. Must be between 0 and 86400",
        ("update", "q", "--message-retention-period-secs", "1209601"):
            "Invalid --message-retention-period-secs value: 1209601. "
            "Must be between 60 and 1209600",
        ("update", "q"): "nothing to update",
        ("send", "q", "{oops"): "BODY is not valid JSON",
        ("ack", "q"): "give lease ids to acknowledge, or --retry LEASE_ID",
        ("consumer", "http", "add", "q", "--visibility-timeout-secs", "0"):
            "Invalid --visibility-timeout-secs value: 0. Must be between 1 and 43200",
        ("--url", "localhost:8787", "list"): "--url must be an http(s) URL",
    }  # fmt: skip
    for args, message in cases.items():
        r = ocd(*args, code=2)
        assert r.stderr.startswith("error: ") and message in r.stderr, (args, r.stderr)
    assert "invalid choice: 'v8'" in ocd("send", "q", "1", "--content-type", "v8", code=2).stderr
    assert "required: ACTION" in ocd(code=2).stderr


def test_an_unreachable_daemon_is_one_clear_line():
    port = free_port()
    r = cli("queues", "--url", f"http://127.0.0.1:{port}", "list")
    assert r.returncode == 1
    assert r.stderr == f"error: cannot reach ocd at http://127.0.0.1:{port}: connection refused\n"
    r = cli("queues", "info", "jobs", env={"OCD_URL": f"http://127.0.0.1:{port}/"})
    assert r.returncode == 1
    assert r.stderr == f"error: cannot reach ocd at http://127.0.0.1:{port}: connection refused\n"


def test_token_new_output_pasted_into_the_config_protects_the_account(ocd_processes, tmp_path):
    r = cli("token", "new", "--account", "acme")
    assert r.returncode == 0, r.stderr
    token_line = re.search(r"^token:\s+(\S+)$", r.stdout, re.M)
    snippet_lines = re.search(r"^\[\[accounts\]\]\n.*\n.*\n", r.stdout, re.M)
    assert token_line and snippet_lines, r.stdout
    token, snippet = token_line[1], snippet_lines[0]
    assert snippet.startswith('[[accounts]]\nid = "acme"\ntoken_sha256 = ["')
    assert f"export OCD_API_TOKEN={token}" in r.stdout
    other = cli("token", "new")
    assert 'id = "local"' in other.stdout and token not in other.stdout

    cfg = tmp_path / "ocd.toml"
    cfg.write_text(f'[server]\nlisten = "127.0.0.1:0"\ndata_dir = "data"\n\n{snippet}')
    port = ocd_processes(cfg).wait_started()

    anonymous = Ocd(port, OCD_ACCOUNT="acme")
    r = anonymous("list", code=1)
    assert r.stderr == (
        "error 10000: Authentication error\nhint: set OCD_API_TOKEN to a token of account acme\n"
    )
    wrong = Ocd(port, OCD_ACCOUNT="acme", OCD_API_TOKEN=token[:-1])
    assert wrong("list", code=1).stderr == "error 10000: Authentication error\n"

    acme = Ocd(port, OCD_ACCOUNT="acme", OCD_API_TOKEN=token)
    acme("create", "invoices")
    acme("send", "invoices", '{"total": 3}')
    assert [q["queue_name"] for q in acme.json("list")] == ["invoices"]
    assert pairs(acme("info", "invoices").stdout)["Backlog"].startswith("1 message(s)")
    # The token is for acme only: the default account is refused, with it or without it.
    assert Ocd(port, OCD_API_TOKEN=token)("list", code=1).stderr.startswith("error 10000: ")
    assert anonymous("info", "invoices", code=1).stderr.startswith("error 10000: ")


def test_fifo_queues_from_the_shell(ocd_processes, tmp_path):
    ocd = start(ocd_processes, tmp_path)
    r = ocd("create", "orders.fifo", "--content-based-deduplication")
    assert r.stdout.startswith("Created queue orders.fifo (id ")
    fields = pairs(ocd("info", "orders.fifo").stdout)
    assert (fields["Type"], fields["Deduplication"]) == (
        "FIFO",
        "content-based or by id, per queue",
    )
    r = ocd("update", "orders.fifo", "--deduplication-scope", "message_group")
    assert r.stdout == (
        "Updated queue orders.fifo: delivery delay 0s, retention 345600s (4d), deduplication "
        "content-based or by id, per message group.\n"
    )
    r = ocd("update", "orders.fifo", "--no-content-based-deduplication")
    assert r.stdout.endswith("deduplication by id, per message group.\n")
    assert "Type" not in pairs(ocd("info", "jobs").stdout)

    r = ocd("create", "tasks", "--deduplication-scope", "message_group", code=1)
    assert r.stderr == (
        "error 10207: deduplication_scope is only valid on FIFO queues (names ending in "
        ".fifo); tasks is a standard queue\n"
    )
    r = ocd("update", "jobs", "--content-based-deduplication", code=1)
    assert "content_based_deduplication is only valid on FIFO queues" in r.stderr
    r = ocd("send", "orders.fifo", '{"n": 1}', code=1)
    assert r.stderr == "error 10203: message_group_id is required on the FIFO queue orders.fifo\n"
    r = ocd("send", "jobs", '{"n": 1}', "--message-group-id", "g", code=1)
    assert r.stderr.startswith("error 10203: message_group_id is only valid on FIFO queues")
    r = ocd("consumer", "http", "add", "orders.fifo", "--dead-letter-queue", "dlq", code=1)
    assert r.stderr.startswith("error 10207: the dead letter queue of the FIFO queue orders.fifo")


def test_fifo_messages_from_the_shell_show_group_and_sequence(ocd_processes, tmp_path):
    """Needs the store's FIFO path: FIFO messages stored, then peeked and pulled."""
    ocd = start(ocd_processes, tmp_path)
    ocd("create", "orders.fifo")
    ocd("consumer", "http", "add", "orders.fifo")
    for n, group in ((1, "a"), (2, "b")):
        ocd(
            "send", "orders.fifo", f'{{"n": {n}}}', "--message-group-id", group,
            "--message-deduplication-id", f"d{n}",
        )  # fmt: skip
    peeked = table(ocd("peek", "orders.fifo", "--batch-size", "10").stdout)
    assert sorted((p["GROUP"], p["BODY"]) for p in peeked) == [("a", '{"n": 1}'), ("b", '{"n": 2}')]
    pulled = table(ocd("pull", "orders.fifo").stdout)
    seqs = {p["GROUP"]: int(p["SEQ"]) for p in pulled}
    assert seqs["a"] < seqs["b"]
