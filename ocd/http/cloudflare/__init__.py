"""The Cloudflare Queues REST API under ``/client/v4`` (reference section 4)."""
