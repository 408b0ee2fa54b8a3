"""kill -9 of ``ocd serve`` under SQS load (boto3, real sockets): every SendMessage(Batch)
that was answered is received afterwards unless it was deleted, and a message whose
DeleteMessageBatch was answered never comes back."""

from __future__ import annotations

import threading
import uuid

import pytest

from tests.acceptance.conftest import recorder_config
from tests.helpers import free_port, wait_sync
from tests.integration.sqs import client

pytestmark = pytest.mark.timeout(180)


def test_kill_9_under_sqs_load_keeps_every_answered_send_and_every_delete(tmp_path, ocd_processes):
    sqs_port = free_port()
    cfg = recorder_config(tmp_path, "", extra=f'\n[sqs]\nlisten = "127.0.0.1:{sqs_port}"\n')
    first = ocd_processes(cfg)
    first.wait_started()
    endpoint = f"http://127.0.0.1:{sqs_port}"
    url = client(endpoint).create_queue(QueueName="durable")["QueueUrl"]

    lock = threading.Lock()
    sent: set[str] = set()  # bodies whose send was answered
    deleted: set[str] = set()  # bodies whose delete was answered
    cut: set[str] = set()  # bodies whose delete was sent but not answered: fate unknown
    stop = threading.Event()

    def send() -> None:
        c = client(endpoint)
        while not stop.is_set():
            bodies = [uuid.uuid4().hex for _ in range(10)]
            entries = [{"Id": str(i), "MessageBody": b} for i, b in enumerate(bodies)]
            try:
                out = c.send_message_batch(QueueUrl=url, Entries=entries)
            except Exception:  # the daemon is gone: this batch's fate is unknown
                return
            ok = {e["Id"] for e in out.get("Successful", [])}
            with lock:
                sent.update(b for i, b in enumerate(bodies) if str(i) in ok)

    def receive() -> None:
        c = client(endpoint)
        while not stop.is_set():
            try:
                got = c.receive_message(
                    QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=2, WaitTimeSeconds=1
                ).get("Messages", [])
                if not got:
                    continue
                entries = [
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)
                ]
                with lock:
                    cut.update(m["Body"] for m in got)
                out = c.delete_message_batch(QueueUrl=url, Entries=entries)
            except Exception:
                return
            ok = {e["Id"] for e in out.get("Successful", [])}
            with lock:
                deleted.update(m["Body"] for i, m in enumerate(got) if str(i) in ok)
                cut.difference_update(m["Body"] for m in got)

    threads = [threading.Thread(target=send) for _ in range(4)]
    threads += [threading.Thread(target=receive) for _ in range(2)]
    for t in threads:
        t.start()
    wait_sync(lambda: len(sent) >= 3000 and len(deleted) >= 500, 120)
    first.kill9()
    stop.set()
    for t in threads:
        t.join(30)
    assert deleted <= sent

    second = ocd_processes(cfg)
    second.wait_started()
    c = client(endpoint)
    # a delete cut by the kill may have committed: those messages may or may not come back
    left = sent - deleted - cut
    seen: set[str] = set()

    def drained() -> bool:
        got = c.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=60, WaitTimeSeconds=1
        ).get("Messages", [])
        seen.update(m["Body"] for m in got)
        return left <= seen

    try:
        wait_sync(drained, 90, interval=0)
    except AssertionError:
        missing = len(left - seen)
        raise AssertionError(f"{missing} of {len(left)} answered sends never came back") from None
    assert not seen & deleted, f"{len(seen & deleted)} deleted message(s) came back"
    assert second.stop() == 0
