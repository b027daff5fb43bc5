"""Kafka error codes and the codec's exception types.

The error table (code, name, retriable, message) is kept as data in ``spec/errors.tsv``; the ``Errors``
enum below lists the same members explicitly so that type checkers and readers see them, and a test keeps
the two (and Kafka's own table) in agreement.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from enum import IntEnum
from functools import cache
from pathlib import Path

ERRORS_TSV = Path(__file__).with_name("errors.tsv")


class Errors(IntEnum):
    """Kafka protocol error codes used by KRaft and the broker registration RPCs."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    MESSAGE_TOO_LARGE = 10
    NETWORK_EXCEPTION = 13
    RECORD_LIST_TOO_LARGE = 18
    CLUSTER_AUTHORIZATION_FAILED = 31
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    KAFKA_STORAGE_ERROR = 56
    SASL_AUTHENTICATION_FAILED = 58
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    INVALID_RECORD = 87
    THROTTLING_QUOTA_EXCEEDED = 89
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    UNKNOWN_CONTROLLER_ID = 116
    INVALID_REGISTRATION = 119
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127

    @property
    def retriable(self) -> bool:
        return error_info(self).retriable

    @property
    def message(self) -> str:
        return error_info(self).message


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    code: int
    name: str
    retriable: bool
    message: str


@cache
def error_table() -> dict[int, ErrorInfo]:
    """Rows of ``spec/errors.tsv`` keyed by code."""
    table: dict[int, ErrorInfo] = {}
    with ERRORS_TSV.open(newline="", encoding="utf-8") as fh:
        for lineno, row in enumerate(csv.DictReader(fh, delimiter="\t"), start=2):
            try:
                code = int(row["code"])
                retriable = {"true": True, "false": False}[row["retriable"]]
            except (KeyError, ValueError) as exc:
                raise ValueError(f"{ERRORS_TSV}:{lineno}: malformed row {row!r}") from exc
            table[code] = ErrorInfo(code, row["name"], retriable, row["message"] or "")
    return table


def error_info(code: int) -> ErrorInfo:
    try:
        return error_table()[int(code)]
    except KeyError:
        raise KeyError(f"error code {int(code)} is not in {ERRORS_TSV.name}") from None


class DecodeError(Exception):
    """Bytes that do not decode: truncated, oversized or inconsistent input.

    The codec raises only this type (and its subclasses) for bad input. ``field`` names what was being
    read and ``offset`` is the byte position within the buffer being decoded.
    """

    def __init__(self, field: str, offset: int, reason: str) -> None:
        super().__init__(f"{field} at byte {offset}: {reason}")
        self.field = field
        self.offset = offset
        self.reason = reason

    error_code = Errors.INVALID_REQUEST


class CorruptRecordError(DecodeError):
    """A record batch whose CRC32C does not match its contents (Kafka's CORRUPT_MESSAGE)."""

    error_code = Errors.CORRUPT_MESSAGE

    def __init__(self, field: str, offset: int, expected_crc: int, actual_crc: int) -> None:
        super().__init__(
            field,
            offset,
            f"CRC32C mismatch: batch says {expected_crc:#010x}, contents give {actual_crc:#010x}",
        )
        self.expected_crc = expected_crc
        self.actual_crc = actual_crc


class FrameTooLargeError(DecodeError):
    """A length prefix larger than the configured maximum (Kafka's socket.request.max.bytes)."""

    def __init__(self, size: int, max_bytes: int, offset: int = 0) -> None:
        super().__init__(
            "frame length", offset, f"frame of {size} bytes exceeds the maximum of {max_bytes} bytes"
        )
        self.size = size
        self.max_bytes = max_bytes


class UnsupportedVersionError(DecodeError):
    """A request for an api key or version this codec does not know.

    The header fields are kept so that a server can still answer UNSUPPORTED_VERSION to the right
    correlation id.
    """

    error_code = Errors.UNSUPPORTED_VERSION

    def __init__(self, api_key: int, version: int, correlation_id: int | None, reason: str) -> None:
        super().__init__("RequestApiVersion", 2, reason)
        self.api_key = api_key
        self.version = version
        self.correlation_id = correlation_id
