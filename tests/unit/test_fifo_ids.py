"""Message group and deduplication ids: SQS's alphabet, printable ASCII without space,
1 to 128 characters; anything else is refused with the surface's invalid-metadata error."""

from __future__ import annotations

import pytest

from ocd.errors import QueueSendArgumentError
from ocd.producer import check_fifo_id


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
