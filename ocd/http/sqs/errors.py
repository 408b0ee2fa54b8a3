"""SQS errors: the JSON shape name, the legacy query code and the HTTP status of each.

botocore raises its modelled exception class from ``__type`` (or, with the
``x-amzn-query-error`` header, from the query code it carries), so every error the endpoint
answers is one of these.
"""

from __future__ import annotations

# shape name -> (query code, HTTP status); reference sqs-protocol.md §1.5
CODES: dict[str, tuple[str, int]] = {
    "QueueDoesNotExist": ("AWS.SimpleQueueService.NonExistentQueue", 400),
    "QueueNameExists": ("QueueAlreadyExists", 400),
    "ReceiptHandleIsInvalid": ("ReceiptHandleIsInvalid", 400),
    "MessageNotInflight": ("AWS.SimpleQueueService.MessageNotInflight", 400),
    "PurgeQueueInProgress": ("AWS.SimpleQueueService.PurgeQueueInProgress", 403),
    "EmptyBatchRequest": ("AWS.SimpleQueueService.EmptyBatchRequest", 400),
    "TooManyEntriesInBatchRequest": ("AWS.SimpleQueueService.TooManyEntriesInBatchRequest", 400),
    "BatchEntryIdsNotDistinct": ("AWS.SimpleQueueService.BatchEntryIdsNotDistinct", 400),
    "InvalidBatchEntryId": ("AWS.SimpleQueueService.InvalidBatchEntryId", 400),
    "BatchRequestTooLong": ("AWS.SimpleQueueService.BatchRequestTooLong", 400),
    "UnsupportedOperation": ("AWS.SimpleQueueService.UnsupportedOperation", 400),
    "OverLimit": ("OverLimit", 403),
    "InvalidAttributeName": ("InvalidAttributeName", 400),
    "InvalidAttributeValue": ("InvalidAttributeValue", 400),
    "InvalidMessageContents": ("InvalidMessageContents", 400),
    "ResourceNotFoundException": ("ResourceNotFoundException", 404),
    "InvalidParameterValueException": ("InvalidParameterValue", 400),
    "MissingRequiredParameterException": ("MissingParameter", 400),
    "AccessDeniedException": ("AccessDenied", 403),
    "InvalidAction": ("InvalidAction", 400),
    "InvalidClientTokenId": ("InvalidClientTokenId", 403),
    "SignatureDoesNotMatch": ("SignatureDoesNotMatch", 403),
    "InternalFailure": ("InternalFailure", 500),
    "ServiceUnavailable": ("ServiceUnavailable", 503),  # disk full, database unreachable
    "IncompleteSignature": ("IncompleteSignature", 400),
    "SerializationException": ("SerializationException", 400),  # a JSON body that does not parse
    "MalformedQueryString": ("MalformedQueryString", 400),  # a Query key that fits no member
}
# Errors AWS reports under the common coral namespace rather than the SQS one.
_CORAL = {
    "InvalidParameterValueException",
    "MissingRequiredParameterException",
    "InvalidAction",
    "InvalidClientTokenId",
    "SignatureDoesNotMatch",
    "InternalFailure",
    "ServiceUnavailable",
    "IncompleteSignature",
    "AccessDeniedException",
    "SerializationException",
    "MalformedQueryString",
}


class SqsError(Exception):
    """An SQS error reply. ``shape`` is a key of :data:`CODES`."""

    def __init__(self, shape: str, message: str) -> None:
        super().__init__(message)
        self.shape = shape
        self.message = message

    @property
    def query_code(self) -> str:
        return CODES[self.shape][0]

    @property
    def status(self) -> int:
        return CODES[self.shape][1]

    @property
    def fault(self) -> str:
        """Whose fault, as the query-compatible header and XML errors say it."""
        return "Receiver" if self.status >= 500 else "Sender"

    @property
    def type_name(self) -> str:
        ns = "com.amazon.coral.service" if self.shape in _CORAL else "com.amazonaws.sqs"
        return f"{ns}#{self.shape}"


def invalid(message: str) -> SqsError:
    return SqsError("InvalidParameterValueException", message)


def missing(name: str) -> SqsError:
    return SqsError(
        "MissingRequiredParameterException", f"The request must contain the parameter {name}."
    )


def no_queue() -> SqsError:
    return SqsError("QueueDoesNotExist", "The specified queue does not exist.")
