"""What the idle daemon's background tasks read without walking every queue: whether any
queue is FIFO (the retention sweep's deduplication prune), and the systemd status line,
which is not worked out at all without systemd to tell."""

from __future__ import annotations

import asyncio

import pytest

from ocd import summary
from ocd.notify import Notifier
from ocd.store import QueueRecord, QueueSettings
from ocd.store.catalogue import Catalogue

pytestmark = pytest.mark.timeout(10)


def record(key: int, name: str) -> QueueRecord:
    return QueueRecord(key, "local", name, f"{key:032x}", 0, 0, QueueSettings())


def test_any_fifo_follows_every_change_of_the_queues():
    c = Catalogue()
    assert not c.any_fifo()
    c.remember(record(1, "jobs"))
    assert not c.any_fifo()
    c.remember(record(2, "orders.fifo"))
    assert c.any_fifo()
    c.remember(record(2, "orders"))  # renamed: no FIFO queue left
    assert not c.any_fifo()
    c.remember(record(3, "b.fifo"))
    assert c.any_fifo()
    c.forget(record(3, "b.fifo"))
    assert not c.any_fifo()
    c.replace([record(4, "x.fifo")], [], {})
    assert c.any_fifo()


async def test_without_systemd_the_status_line_is_never_worked_out():
    asked = []
    task = asyncio.ensure_future(
        summary.report_status(Notifier({}), lambda: asked.append(1) or "", every_s=0.001)
    )
    await asyncio.wait_for(task, 5)  # it returns: nothing to report to
    assert asked == []
