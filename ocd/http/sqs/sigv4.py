"""Who an SQS request comes from: AWS Signature Version 4, checked against the key pairs of
``[[accounts]]`` (``sqs_keys``), in the ``Authorization`` header or a presigned query.

Without accounts every request, signed or not, is account ``local`` (shown as
``000000000000``); the region is the signature's credential scope, else ``[sqs] region``.
Queues are kept apart per region: those of ``[sqs] region`` are the account's own (the
queues the Cloudflare API and Workers see), those of any other region live in the store
under the derived account ``<account>@<region>`` (``Caller.store_account``), which no
config account can be named (ids are ``[A-Za-z0-9_-]``), so the REST API and the dashboard
never reach them.
With accounts, a request must be signed by a configured key whose ``X-Amz-Date`` is within
15 minutes of now (a presigned URL also within its ``X-Amz-Expires``); the signature is
compared in constant time. Refusals use SQS's codes: ``InvalidClientTokenId`` (unknown
key), ``SignatureDoesNotMatch`` (wrong signature, stale date), ``AccessDenied`` (unsigned).
"""

from __future__ import annotations

import calendar
import hashlib
import hmac
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import quote, unquote

from ocd.http.sqs.errors import SqsError

ALGORITHM = "AWS4-HMAC-SHA256"
MAX_SKEW_S = 900
MAX_EXPIRES_S = 604_800
LOCAL_ACCOUNT_ID = "000000000000"
_AUTH = re.compile(
    r"AWS4-HMAC-SHA256\s+Credential=([^,\s]+)\s*,\s*SignedHeaders=([^,\s]+)\s*,\s*"
    r"Signature=([0-9a-f]{64})\s*"
)
_DATE = re.compile(r"\d{8}T\d{6}Z")
# A credential scope's region: what AWS names regions with (lowercase letters, digits, '-'),
# so that it can be part of an ARN and of a store account name.
_REGION = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,48}[a-z0-9])?")


@dataclass(frozen=True, slots=True)
class Caller:
    """The account a request acts as: ocd's id and the 12-digit one SQS clients see, and
    the region it names (``default_region``: ``[sqs] region``)."""

    account: str
    account_id: str
    region: str
    default_region: str
    access_key_id: str | None = None

    @property
    def store_account(self) -> str:
        """The store account of the caller's queues in its region."""
        return regional_account(self.account, self.region, self.default_region)


def regional_account(account: str, region: str, default_region: str) -> str:
    """The store account holding ``account``'s SQS queues of ``region``: the account itself
    in the default region (where the Cloudflare side's queues are), else
    ``<account>@<region>``."""
    return account if region == default_region else f"{account}@{region}"


@dataclass(frozen=True, slots=True)
class Key:
    account: str
    account_id: str
    secret: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class Signed:
    """A request's signature parts, as the client sent them."""

    access_key_id: str
    date: str  # yyyymmdd of the scope
    region: str
    service: str
    signed_headers: tuple[str, ...]
    signature: str
    amz_date: str
    expires_s: int | None  # a presigned URL's X-Amz-Expires


@dataclass(frozen=True, slots=True)
class Request:
    """What a signature covers, taken from the HTTP request as received."""

    method: str
    path: str  # decoded
    query: Sequence[tuple[str, str]]  # decoded pairs, in order
    headers: Mapping[str, Sequence[str]]  # lower-case name -> values
    body: bytes


def _denied(shape: str, message: str) -> SqsError:
    return SqsError(shape, message)


def parse(req: Request) -> Signed | None:
    """The signature of a request, or None for an unsigned one."""
    auth = next(iter(req.headers.get("authorization", ())), None)
    if auth is not None and auth.startswith(ALGORITHM):
        m = _AUTH.fullmatch(auth.strip())
        if m is None:
            raise _denied("IncompleteSignature", "The Authorization header is malformed.")
        credential, signed, signature = m.groups()
        amz_date = next(iter(req.headers.get("x-amz-date", ())), "")
        expires = None
    else:
        q = dict(req.query)
        if q.get("X-Amz-Algorithm") != ALGORITHM:
            return None
        credential = q.get("X-Amz-Credential", "")
        signed = q.get("X-Amz-SignedHeaders", "")
        signature = q.get("X-Amz-Signature", "")
        amz_date = q.get("X-Amz-Date", "")
        try:
            expires = int(q.get("X-Amz-Expires", "0"))
        except ValueError:
            expires = -1
        if not 1 <= expires <= MAX_EXPIRES_S:
            raise _denied("IncompleteSignature", "X-Amz-Expires must be 1..604800 seconds.")
    parts = credential.split("/")
    if len(parts) != 5 or parts[4] != "aws4_request" or not _DATE.fullmatch(amz_date):
        raise _denied("IncompleteSignature", "The credential scope or X-Amz-Date is malformed.")
    return Signed(
        parts[0],
        parts[1],
        parts[2],
        parts[3],
        tuple(signed.split(";")),
        signature,
        amz_date,
        expires,
    )


def canonical_request(req: Request, s: Signed) -> str:
    path = quote(req.path or "/", safe="/~")
    pairs = sorted(
        (quote(k, safe="-_.~"), quote(v, safe="-_.~"))
        for k, v in req.query
        if not (s.expires_s is not None and k == "X-Amz-Signature")
    )
    query = "&".join(f"{k}={v}" for k, v in pairs)
    headers = "".join(
        f"{h}:{','.join(' '.join(v.split()) for v in req.headers.get(h, ()))}\n"
        for h in s.signed_headers
    )
    payload = next(iter(req.headers.get("x-amz-content-sha256", ())), None)
    if payload is None:
        payload = hashlib.sha256(req.body).hexdigest()
    return "\n".join(
        [req.method.upper(), path, query, headers, ";".join(s.signed_headers), payload]
    )


def signature(secret: str, s: Signed, canonical: str) -> str:
    scope = f"{s.date}/{s.region}/{s.service}/aws4_request"
    to_sign = "\n".join(
        [ALGORITHM, s.amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    key = f"AWS4{secret}".encode()
    for part in (s.date, s.region, s.service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


def _epoch_s(amz_date: str) -> float:
    try:
        return float(calendar.timegm(time.strptime(amz_date, "%Y%m%dT%H%M%SZ")))
    except ValueError:
        raise _denied("IncompleteSignature", "X-Amz-Date is not a valid date.") from None


class Verifier:
    """The SQS endpoint's gate, built from ``[[accounts]]``: ``keys`` maps each access key
    id to its account; with no keys at all (no accounts), everything is account ``local``."""

    def __init__(self, keys: Mapping[str, Key], required: bool, region: str) -> None:
        self.keys = dict(keys)
        self.required = required
        self.region = region

    def caller(self, req: Request, now_ms: int) -> Caller:
        s = parse(req) if self.required else _lenient(req)
        if not self.required:
            key_id = s.access_key_id if s else None
            return Caller("local", LOCAL_ACCOUNT_ID, self._region(s), self.region, key_id)
        if s is None:
            raise _denied(
                "AccessDeniedException",
                "Access to the resource is denied: the request is not signed (SigV4).",
            )
        key = self.keys.get(s.access_key_id)
        if key is None:
            raise _denied(
                "InvalidClientTokenId", "The security token included in the request is invalid."
            )
        if s.service != "sqs" or not s.amz_date.startswith(s.date):
            raise _denied("SignatureDoesNotMatch", "The credential scope does not match.")
        if "host" not in s.signed_headers and s.expires_s is None:
            raise _denied("SignatureDoesNotMatch", "The Host header must be signed.")
        signed_at = _epoch_s(s.amz_date)
        now_s = now_ms / 1000
        late = now_s - signed_at > (MAX_SKEW_S if s.expires_s is None else s.expires_s)
        if late or signed_at - now_s > MAX_SKEW_S:
            raise _denied(
                "SignatureDoesNotMatch",
                f"Signature expired: {s.amz_date} is not within 15 minutes of the server time"
                + (" or past its X-Amz-Expires." if s.expires_s is not None else "."),
            )
        expected = signature(key.secret, s, canonical_request(req, s))
        if not hmac.compare_digest(expected, s.signature):
            raise _denied(
                "SignatureDoesNotMatch",
                "The request signature we calculated does not match the signature you "
                "provided. Check your AWS Secret Access Key and signing method.",
            )
        return Caller(key.account, key.account_id, self._region(s), self.region, s.access_key_id)

    def _region(self, s: Signed | None) -> str:
        """The region a request names (its credential scope's), else ``[sqs] region``."""
        region = s.region if s is not None and s.region else self.region
        if not _REGION.fullmatch(region):
            raise _denied(
                "SignatureDoesNotMatch",
                f"Credential should be scoped to a valid region, not {region[:64]!r} "
                "(lowercase letters, digits and '-').",
            )
        return region


def _lenient(req: Request) -> Signed | None:
    """Without accounts: whatever credential scope a request names, checked no further."""
    try:
        return parse(req)
    except SqsError:
        return None


def decoded_query(raw: str) -> list[tuple[str, str]]:
    """The pairs of a raw query string, percent-decoded (``+`` stays a plus, as SigV4 has it)."""
    out = []
    for pair in raw.split("&") if raw else ():
        k, _, v = pair.partition("=")
        out.append((unquote(k), unquote(v)))
    return out
