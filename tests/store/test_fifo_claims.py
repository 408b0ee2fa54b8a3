"""A FIFO claim takes the batch a walk over the groups would take, on every backend.

The store reads many groups' runs per statement (``ocd.store.sqlite.fifo.claim``, the
PostgreSQL ``ocd_fifo_claim``); these tests hold it to the plain rule of the contract: the
ready groups, longest-waiting first, each giving its run of consecutive ready messages from
its head, until the batch is full. Random queues (group depths from 1 to 60, delays inside
runs, groups already in flight) are claimed until empty and every batch is compared with
the walk's.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from ocd.store import Claim, DeadLetter, NewMessage, QueueSettings
from tests.store.conftest import T0

NO_DLQ = DeadLetter(None)
LEASE = 60_000
NOW = T0 + 20_000


@dataclass
class Model:
    """The queue as the contract sees it: per group its messages in sequence order, as
    (message id, visible at), and which groups are in flight."""

    groups: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    in_flight: set[str] = field(default_factory=set)

    def batch(self, now: int, limit: int) -> list[str]:
        ready = [
            (msgs[0][1], g)
            for g, msgs in self.groups.items()
            if msgs and g not in self.in_flight and msgs[0][1] <= now
        ]
        out: list[str] = []
        for _, g in sorted(ready)[:limit]:
            for mid, visible in self.groups[g]:
                if len(out) >= limit or visible > now:
                    break
                out.append(mid)
            if len(out) >= limit:
                break
        return out


async def fill(store, rng: random.Random, n_groups: int, interleaved: bool = True):
    """A FIFO queue of ``n_groups`` groups of random depths, sent interleaved (or one group
    after another); every message visible at a time of its own (so that the groups' order
    is one), one in six of them delayed past ``NOW``."""
    q = await store.ensure_queue("walk.fifo", "local", QueueSettings(), T0)
    model = Model()
    depths = [rng.choice((1, 1, 2, 3, 5, 8, 20, 60)) for _ in range(n_groups)]
    times = iter(rng.sample(range(1, 19_000), sum(depths)))
    msgs: list[NewMessage] = []
    for gi, depth in enumerate(depths):
        for k in range(depth):
            later = 50_000 if k and rng.random() < 1 / 6 else 0
            mid = f"{gi:04d}-{k:03d}".ljust(32, "0")
            msgs.append(NewMessage(mid, "json", b"1", T0, T0 + next(times) + later, f"g{gi}", mid))
    if interleaved:  # groups interleaved in sequence order, as sends from many producers
        rng.shuffle(msgs)
    for m in msgs:  # a group's order is the order sent
        model.groups.setdefault(m.group or "", []).append((m.id, m.visible_ms))
    for i in range(0, len(msgs), 100):
        await store.enqueue(q, msgs[i : i + 100])
    return q, model


@pytest.mark.parametrize("interleaved", [True, False], ids=["interleaved", "group-by-group"])
@pytest.mark.parametrize("seed", range(6))
async def test_every_batch_is_the_walk_over_the_groups(store, seed, interleaved):
    rng = random.Random(seed)
    q, model = await fill(store, rng, rng.choice((3, 40, 250)), interleaved)
    now = NOW
    # some groups are in flight already: their heads are leased by an earlier claim
    first = await store.claim(q, Claim(7, now, now + LEASE, 10, NO_DLQ))
    assert [d.id for d in first.deliveries] == model.batch(now, 7)
    for d in first.deliveries:
        model.in_flight.add(d.group)
    held = {d.group for d in first.deliveries}
    for _ in range(500):
        limit = rng.choice((1, 3, 10, 100))
        want = model.batch(now, limit)
        got = (await store.claim(q, Claim(limit, now, now + LEASE, 10, NO_DLQ))).deliveries
        assert [d.id for d in got] == want, f"limit {limit}"
        if not got:
            break
        assert not {d.group for d in got} & held  # a group in flight gives nothing
        # ack the batch: each group moves on past it and may be claimed again
        await store.settle(q, [d.seq for d in got], [], [], NO_DLQ, now)
        for d in got:
            model.groups[d.group] = [m for m in model.groups[d.group] if m[0] != d.id]
    # what is left: the groups in flight, and runs behind a message not visible yet
    for g, msgs in model.groups.items():
        if msgs and g not in held:
            assert msgs[0][1] > now, g
