"""What a reload may never do: weaken the checks on a listener that is already bound.

A listener's address changes only at a restart, so after a reload the sockets still sit where
the *running* config put them. A new config is judged against those bound addresses, not the
ones it names: a config that says ``listen = "127.0.0.1:P"`` and drops ``[[accounts]]`` is
fine for a fresh start, but applied to a daemon still bound to ``0.0.0.0:P`` it would open
every queue to the network without a token. :func:`weakenings` lists every such change; the
daemon rejects a reload whole when the list is not empty.
"""

from __future__ import annotations

from collections.abc import Mapping

from ocd.config import Config
from ocd.config.file import is_loopback
from ocd.errors import Problem


def weakenings(running: Config, new: Config, bound: Mapping[str, str]) -> list[Problem]:
    """Why ``new`` may not replace ``running`` on listeners bound as ``bound`` (listener name,
    e.g. ``"server"`` or ``"sqs"``, -> the address it is bound to), each naming the key
    path; empty when it may."""
    reasons: list[Problem] = []
    public = {name: host for name, host in bound.items() if not is_loopback(host)}
    if not public:
        return reasons
    where = ", ".join(f"[{name}] on {host}" for name, host in sorted(public.items()))
    if not new.accounts:
        reasons.append(
            Problem(
                new.path,
                "accounts",
                f"the listener {where} is bound to a non-loopback address until a restart, and the"
                " new config has no [[accounts]]: it would answer every request without a token",
            )
        )
        return reasons
    was_read = {h for a in running.accounts for h in a.read_only_sha256}
    now_admin = {h for a in new.accounts for h in a.token_sha256 if h not in a.read_only_sha256}
    promoted = sorted(was_read & now_admin)
    if promoted:
        reasons.append(
            Problem(
                new.path,
                "accounts",
                f'{len(promoted)} token(s) with role = "read" would become admin tokens on the'
                f" non-loopback listener {where} (restart to change a token's role)",
            )
        )
    if running.ui.read_only and new.ui.enabled and not new.ui.read_only:
        reasons.append(
            Problem(
                new.path,
                "ui.read_only",
                f"[ui] read_only would be switched off on the non-loopback listener {where}"
                " (restart to change it)",
            )
        )
    return reasons
