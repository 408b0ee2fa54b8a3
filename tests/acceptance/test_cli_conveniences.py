"""The Naive-style conveniences of ``ocd queues`` against a real daemon: create with a
linked dead-letter queue, receive by long poll, ack by lease id, attributes, and delete
with the dead-letter queue."""

from __future__ import annotations

import re
import threading

import pytest

from tests.acceptance.test_cli_queues import pairs, start

pytestmark = pytest.mark.timeout(120)


def test_create_fifo_with_dlq_links_them_and_messages_dead_letter_after_the_retries(
    ocd_processes, tmp_path
):
    ocd = start(ocd_processes, tmp_path)
    r = ocd("create", "jobs", "--fifo", "--dlq", "--max-retries", "1")
    assert re.match(r"Created queue jobs\.fifo \(id [0-9a-f]{32}\)\.\n", r.stdout)
    assert "Created its dead-letter queue jobs-dlq.fifo" in r.stdout
    assert "dead-lettered after 2 deliveries" in r.stdout
    info = pairs(ocd("info", "jobs.fifo").stdout)
    assert info["Dead letter queue"] == "jobs-dlq.fifo" and info["Max retries"] == "1"
    assert info["Type"] == "FIFO"
    assert pairs(ocd("info", "jobs-dlq.fifo").stdout)["Type"] == "FIFO"
    ocd(
        "send",
        "jobs.fifo",
        '"poison"',
        "--message-group-id",
        "g",
        "--message-deduplication-id",
        "1",
    )
    for attempt in (1, 2):
        got = ocd.json("receive", "jobs.fifo", "--wait", "5", "--visibility", "1")
        assert [m["attempts"] for m in got["messages"]] == [attempt]
        ocd("ack", "jobs.fifo", "--retry", got["messages"][0]["lease_id"])
    # its retries spent: the next receive moves it to the dead-letter queue
    assert ocd.json("receive", "jobs.fifo", "--wait", "0")["messages"] == []
    attrs = ocd.json("attributes", "jobs.fifo")
    assert (attrs["dead_letter_queue"], attrs["dead_letter_depth"]) == ("jobs-dlq.fifo", 1)
    assert (attrs["depth"], attrs["in_flight"], attrs["backlog"]) == (0, 0, 0)
    # the default is SQS's usual five deliveries
    made = ocd.json("create", "std", "--dlq")
    assert made["queue"]["queue_name"] == "std"
    assert made["dead_letter_queue"]["queue_name"] == "std-dlq"
    assert made["consumer"]["settings"]["max_retries"] == 4
    assert made["consumer"]["dead_letter_queue"] == "std-dlq"
    ocd("create", "x", "--max-retries", "3", code=2)  # only with --dlq


def test_receive_long_polls_prints_leases_and_ack_acknowledges(ocd_processes, tmp_path):
    ocd = start(ocd_processes, tmp_path)
    ocd("create", "work", "--dlq")
    # a receive waits for a message sent while it waits
    out: dict[str, str] = {}

    def receive() -> None:
        out["stdout"] = ocd("receive", "work", "--wait", "20", "--max", "10").stdout

    t = threading.Thread(target=receive)
    t.start()
    ocd("send", "work", '{"n": 1}')
    t.join(30)
    fields = pairs(out["stdout"])
    assert fields["Body"] == '{"n": 1}' and fields["Attempts"] == "1"
    assert "Ack with: ocd queues ack work LEASE_ID..." in out["stdout"]
    lease = fields["Lease id"]
    attrs = ocd.json("attributes", "work")
    assert (attrs["depth"], attrs["in_flight"], attrs["delayed"]) == (0, 1, 0)
    assert attrs["oldest_age_ms"] >= 0 and attrs["dead_letter_depth"] == 0
    assert ocd("ack", "work", lease).stdout == "Acknowledged 1, retried 0 message(s).\n"
    ocd("send", "work", '"later"', "--delay-secs", "3600")
    ocd("send", "work", "now", "--content-type", "text")
    human = pairs(ocd("attributes", "work").stdout)
    assert human["Depth"] == "1 ready" and human["Delayed"] == "1"
    assert human["In flight"] == "0" and human["Dead letter queue"] == "work-dlq (0 message(s))"
    assert human["Oldest message"].endswith(" old")
    got = ocd.json("receive", "work", "--max", "5", "--visibility", "30", "--wait", "1")
    assert [m["body"] for m in got["messages"]] == ["now"]
    assert ocd("receive", "work", "--wait", "0").stdout == "No messages.\n"
    ocd("receive", "work", "--wait", "21", code=2)
    ocd("receive", "work", "--max", "0", code=2)


def test_delete_with_dlq_deletes_both(ocd_processes, tmp_path):
    ocd = start(ocd_processes, tmp_path)
    ocd("create", "gone", "--dlq")
    ocd("create", "plain")
    r = ocd("delete", "gone", "--with-dlq")
    assert r.stdout == "Deleted queue gone and its dead-letter queue gone-dlq.\n"
    names = {q["queue_name"] for q in ocd.json("list")}
    assert "gone" not in names and "gone-dlq" not in names
    r = ocd("delete", "plain", "--with-dlq", code=1)
    assert "has no dead-letter queue; nothing deleted" in r.stderr
    assert "plain" in {q["queue_name"] for q in ocd.json("list")}
