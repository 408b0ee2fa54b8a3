"""SigV4 checks of the SQS endpoint against requests signed by botocore's own signer (header
and presigned query), with an injected clock."""

from __future__ import annotations

import calendar
import time
from urllib.parse import urlsplit

import pytest
from botocore.auth import SigV4Auth, SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from ocd.http.sqs import sigv4
from ocd.http.sqs.errors import SqsError

NOW_MS = int(time.time()) * 1000  # botocore stamps X-Amz-Date from the wall clock
KEYS = {"AKIAACMEKEY000001": sigv4.Key("acme", "111122223333", "s3cret")}
BODY = b'{"QueueName": "q"}'


def signed(
    key: str = "AKIAACMEKEY000001", secret: str = "s3cret", body: bytes = BODY
) -> sigv4.Request:
    r = AWSRequest(
        "POST",
        "http://127.0.0.1:9324/",
        data=body,
        headers={"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.X"},
    )
    SigV4Auth(Credentials(key, secret), "sqs", "eu-west-1").add_auth(r)
    headers = {k.lower(): [v] for k, v in r.headers.items()}
    headers["host"] = ["127.0.0.1:9324"]
    return sigv4.Request("POST", "/", [], headers, body)


def presigned(expires: int = 300) -> sigv4.Request:
    r = AWSRequest("GET", "http://127.0.0.1:9324/?Action=ListQueues&Version=2012-11-05")
    creds = Credentials("AKIAACMEKEY000001", "s3cret")
    SigV4QueryAuth(creds, "sqs", "eu-west-1", expires).add_auth(r)
    url = urlsplit(r.url)
    return sigv4.Request(
        "GET", url.path, sigv4.decoded_query(url.query), {"host": ["127.0.0.1:9324"]}, b""
    )


V = sigv4.Verifier(KEYS, True, "us-east-1")


def _signed_at(r: sigv4.Request) -> int:
    (stamp,) = r.headers.get("x-amz-date") or [dict(r.query)["X-Amz-Date"]]
    return calendar.timegm(time.strptime(stamp, "%Y%m%dT%H%M%SZ")) * 1000


def test_a_request_signed_with_a_configured_key_is_its_account() -> None:
    r = signed()
    c = V.caller(r, _signed_at(r) + 14 * 60_000)
    assert (c.account, c.account_id, c.region) == ("acme", "111122223333", "eu-west-1")


@pytest.mark.parametrize(
    ("request_", "skew_ms", "code"),
    [
        (signed(secret="wrong"), 0, "SignatureDoesNotMatch"),
        (signed(key="AKIAUNKNOWNKEY001"), 0, "InvalidClientTokenId"),
        (signed(), 16 * 60_000, "SignatureDoesNotMatch"),
        (signed(), -16 * 60_000, "SignatureDoesNotMatch"),
        (sigv4.Request("POST", "/", [], {"host": ["h"]}, BODY), 0, "AccessDenied"),
    ],
    ids=["wrong secret", "unknown key", "expired", "from the future", "unsigned"],
)
def test_refusals_use_sqs_codes(request_: sigv4.Request, skew_ms: int, code: str) -> None:
    with pytest.raises(SqsError) as e:
        V.caller(request_, NOW_MS + skew_ms)
    assert e.value.query_code == code


def test_a_tampered_body_no_longer_matches() -> None:
    r = signed()
    forged = sigv4.Request(r.method, r.path, r.query, r.headers, b'{"QueueName": "other"}')
    with pytest.raises(SqsError) as e:
        V.caller(forged, NOW_MS)
    assert e.value.query_code == "SignatureDoesNotMatch"


def test_presigned_urls_are_accepted_until_they_expire() -> None:
    r = presigned(expires=300)
    at = _signed_at(r)
    assert V.caller(r, at + 299_000).account == "acme"
    with pytest.raises(SqsError) as e:
        V.caller(r, at + 301_000)
    assert e.value.query_code == "SignatureDoesNotMatch"


def test_without_accounts_anything_is_local_in_the_scope_region() -> None:
    lenient = sigv4.Verifier({}, False, "us-east-1")
    c = lenient.caller(signed(secret="whatever"), NOW_MS)
    assert (c.account, c.account_id, c.region) == ("local", "000000000000", "eu-west-1")
    unsigned = lenient.caller(sigv4.Request("POST", "/", [], {}, b""), NOW_MS)
    assert (unsigned.account, unsigned.region) == ("local", "us-east-1")


def test_a_region_other_than_the_default_is_a_store_account_of_its_own() -> None:
    r = signed()  # scoped to eu-west-1
    c = V.caller(r, _signed_at(r))
    assert (c.account, c.store_account) == ("acme", "acme@eu-west-1")
    home = sigv4.Verifier(KEYS, True, "eu-west-1").caller(r, _signed_at(r))
    assert home.store_account == "acme"


def test_a_malformed_region_in_the_scope_is_refused() -> None:
    lenient = sigv4.Verifier({}, False, "us-east-1")
    auth = "AWS4-HMAC-SHA256 Credential=AKID/20260101/EU@WEST/sqs/aws4_request, " + (
        "SignedHeaders=host, Signature=" + "0" * 64
    )
    r = sigv4.Request(
        "POST", "/", [], {"authorization": [auth], "x-amz-date": ["20260101T000000Z"]}, b""
    )
    with pytest.raises(SqsError) as e:
        lenient.caller(r, NOW_MS)
    assert e.value.query_code == "SignatureDoesNotMatch"
