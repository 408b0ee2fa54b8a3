"""What the dashboard's pages show, as plain values: browser parameters, rows, sparklines,
rates from the ring buffers."""

from __future__ import annotations

from ocd.http.ui.live import QueueHistory
from ocd.http.ui.views import browse_params, environment, message_view, sparkline
from ocd.store import BrowseCursor, Browsed


def test_browse_params_keep_to_page_sizes_states_and_cursors():
    _, q, error = browse_params({"limit": "100", "order": "newest", "cursor": "5-7"})
    assert (q.limit, q.newest_first, q.after, error) == (100, True, BrowseCursor(5, 7), "")
    _, q, error = browse_params({"limit": "1000", "state": "gone", "cursor": "x"})
    assert (q.limit, q.state, q.after) == (25, "any", None) and "cursor" in error
    _, q, error = browse_params({"from": "2026-01-31T12:00", "to": "nonsense"})
    assert "Times" in error and q.sent_from_ms is None
    _, q, error = browse_params({"from": "2026-01-31T12:00", "attempts": "3"})
    assert q.sent_from_ms == 1_769_860_800_000 and q.min_attempts == 3 and error == ""


def test_a_message_view_previews_200_characters_and_says_when_cut():
    body = ("é" * 300).encode()
    m = Browsed(1, "a" * 32, "text", body[:800], len(body), 0, 0, 2, False)
    v = message_view(m, now_ms=10)
    assert v["preview"] == "é" * 200 and v["preview_cut"] and v["state"] == "ready"
    raw = Browsed(2, "b" * 32, "bytes", b"\x00\x01", 2, 0, 99, 0, True)
    assert message_view(raw, now_ms=10, full=True)["body"] == "AAE="
    assert message_view(raw, now_ms=10)["state"] == "in flight"


def test_templates_escape_whatever_they_are_given():
    html = environment().from_string("<p>{{ x }}</p>").render(x="<script>alert(1)</script>")
    assert html == "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>"


def test_sparkline_scales_to_its_peak():
    s = sparkline([0, 5, 10])
    assert (s["count"], s["last"], s["peak"]) == (3, 10, 10)
    assert s["points"].split()[-1] == "240.0,2.0" and sparkline([])["count"] == 0


def test_rates_count_the_last_minute_without_extrapolating():
    h = QueueHistory()
    h.seconds.append((0.0, (0.0, 0.0, 0.0, 0.0)))
    h.seconds.append((10.0, (12.0, 3.0, 1.0, 2.0)))
    assert h.per_minute() == {"sent": 12, "acked": 3, "retried": 1, "dead_lettered": 2}
    h.points.extend([(0, 5, 0, 0, 0, 0), (60_000, 7, 10, 4, 0, 1)])
    assert h.series() == {"backlog": [5, 7], "sent": [10], "acked": [4], "retried": [0],
                          "dead_lettered": [1]}  # fmt: skip
