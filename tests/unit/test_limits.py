"""Every surface holds to the one table of limits and codes, ``ocd.limits``: the binding,
the producer, the config file, the REST API's schemas and handlers' ranges, the SQS
endpoint and the worker runtime (which may not import ``ocd`` and keeps a copy)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ocd import codec, limits, producer
from ocd.config import load_config
from ocd.errors import ConfigError, QueueSendError
from ocd.http.cloudflare import envelope, schemas
from ocd.http.sqs import queues as sqs_queues
from runtime.queue import _delay_option


def test_the_runtime_takes_exactly_the_delay_range():
    assert _delay_option(None, limits.DELAY_S.high, None) == limits.DELAY_S.high
    assert _delay_option(None, limits.DELAY_S.low, None) == limits.DELAY_S.low
    for bad in (limits.DELAY_S.high + 1, limits.DELAY_S.low - 1):
        with pytest.raises(ValueError, match=f"between 0 and {limits.DELAY_S.high}"):
            _delay_option(None, bad, None)


def test_the_producer_checks_the_tables_numbers():
    assert producer.MAX_MESSAGE_BYTES == limits.MESSAGE_BYTES
    assert producer.MAX_BATCH_MESSAGES == limits.BATCH_MESSAGES
    assert producer.MAX_BATCH_BYTES == limits.BATCH_BYTES
    assert producer.check_delay(limits.DELAY_S.high) == limits.DELAY_S.high
    with pytest.raises(QueueSendError) as e:
        producer.check_delay(limits.DELAY_S.high + 1)
    assert e.value.code == limits.MESSAGE_METADATA_INVALID
    assert len(codec.encode("x" * limits.MESSAGE_BYTES, "text")) == limits.MESSAGE_BYTES


def _range(schema: dict) -> tuple[int, int]:
    return schema["minimum"], schema["maximum"]


def test_the_rest_schemas_say_the_tables_ranges():
    settings = schemas.QUEUE_SETTINGS_INPUT["properties"]
    assert _range(settings["delivery_delay"]) == tuple(limits.DELAY_S)
    assert _range(settings["message_retention_period"]) == tuple(limits.RETENTION_S)
    assert settings["message_retention_period"]["default"] == limits.RETENTION_DEFAULT_S
    assert _range(schemas.DELAY) == tuple(limits.DELAY_S)
    assert schemas.MAX_VISIBILITY_MS == limits.VISIBILITY_MS.high


def test_the_rest_error_codes_are_the_tables():
    for name in envelope.__all__:
        assert getattr(envelope, name) == getattr(limits, name)


def test_the_sqs_ranges_are_the_tables():
    assert sqs_queues.MAX_DELAY_S == limits.SQS_DELAY_S.high
    assert sqs_queues.MAX_VISIBILITY_S == limits.SQS_VISIBILITY_S.high
    assert sqs_queues.MAX_MESSAGE_BYTES == limits.SQS_MESSAGE_BYTES


@pytest.mark.parametrize(
    ("key", "value", "ok"),
    [
        ("delivery_delay", limits.DELAY_S.high, True),
        ("delivery_delay", limits.DELAY_S.high + 1, False),
        ("message_retention_period", limits.RETENTION_S.low, True),
        ("message_retention_period", limits.RETENTION_S.low - 1, False),
        ("message_retention_period", limits.RETENTION_S.high + 1, False),
    ],
)
def test_the_config_file_takes_exactly_the_tables_ranges(
    tmp_path: Path, key: str, value: int, ok: bool
) -> None:
    cfg = tmp_path / "ocd.toml"
    cfg.write_text(f'[server]\ndata_dir = "d"\n[[queues]]\nname = "q"\n{key} = {value}\n')
    if ok:
        q = load_config(cfg, environ={}).queue("q")
        assert q is not None
    else:
        with pytest.raises(ConfigError) as e:
            load_config(cfg, environ={})
        assert f"queues[0].{key}" in str(e.value)
