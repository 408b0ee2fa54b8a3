"""Message group and deduplication ids: SQS's alphabet, printable ASCII without space,
1 to 128 characters; anything else is refused with the surface's invalid-metadata error."""

from __future__ import annotations

import random

import pytest

from ocd.errors import QueueSendArgumentError
from ocd.producer import _FIFO_ID, check_fifo_id


@pytest.mark.parametrize(
    "value", ["a", "!", "~", "order-9", "x" * 128, "".join(map(chr, range(33, 127)))]
)
def test_printable_ascii_of_1_to_128_characters_is_an_id(value):
    assert check_fifo_id(value, "messageGroupId") == value


@pytest.mark.parametrize(
    "value",
    ["", "x" * 129, "a b", "a\tb", "a\nb", "caf\u00e9", "\x7f", "\x00", "a\u2028", 7, None, b"ab"],
)
def test_anything_else_is_refused_naming_the_field(value):
    with pytest.raises(QueueSendArgumentError, match=r"messageDeduplicationId .* is invalid"):
        check_fifo_id(value, "messageDeduplicationId")


def test_the_check_is_the_documented_pattern():
    # check_fifo_id uses str methods; the OpenAPI schema documents _FIFO_ID: the same set
    rnd = random.Random(7)
    alphabet = [chr(i) for i in range(0, 300)] + ["\u2028", "\U0001f600"]
    printable = [chr(i) for i in range(33, 127)]
    for _ in range(20_000):
        pool = alphabet if rnd.random() < 0.3 else printable
        value = "".join(rnd.choice(pool) for _ in range(rnd.choice([0, 1, 2, 9, 127, 128, 129])))
        try:
            accepted = check_fifo_id(value, "messageGroupId") == value
        except QueueSendArgumentError:
            accepted = False
        assert accepted == (_FIFO_ID.fullmatch(value) is not None), repr(value)
