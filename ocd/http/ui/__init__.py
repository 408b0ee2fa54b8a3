"""The dashboard served by the daemon at ``/__ocd/ui/``: Jinja2 templates and one vanilla
JavaScript file shipped as package data, live numbers over Server-Sent Events."""

from ocd.http.ui.app import MOUNT, Dashboard

__all__ = ["MOUNT", "Dashboard"]
