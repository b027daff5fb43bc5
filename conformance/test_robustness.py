"""The network layer's contract: unparseable requests get an error or a closed connection, nothing else."""

from __future__ import annotations

import asyncio
import struct

from kraft_tck.conformance import bodies as B
from kraft_tck.conformance.cases import case
from kraft_tck.conformance.scenario import Scenario
from kraft_tck.conformance.transport import KafkaClient, RequestError


def header(api_key: int, version: int, corr: int = 77, client: bytes = b"kraft-tck-fuzz") -> bytes:
    return struct.pack(">hhih", api_key, version, corr, len(client)) + client


async def abuse(sc: Scenario, name: str, data: bytes, hang_up: bool = False) -> None:
    """Send ``data`` on a fresh raw connection, then check the node answered or closed, and still serves."""
    a = sc.virtual_ids[0]
    epoch = sc.q.leader_epoch
    reader, writer = await sc.target.open_connection()
    sc.frames.note(a, f"raw {name}: {data[:24].hex()}{'…' if len(data) > 24 else ''} ({len(data)} bytes)")
    writer.write(data)
    await writer.drain()
    if hang_up:
        if writer.can_write_eof():
            writer.write_eof()  # the rest of the frame never comes
        else:
            writer.close()  # TLS cannot half-close: the connection ends there (the frame still never comes)
    outcome = "nothing"
    try:
        got = await asyncio.wait_for(reader.read(4), sc.bound_ms(sc.timeouts.request_timeout_ms) / 1000)
        outcome = "closed" if not got else "answered"
    except (ConnectionError, OSError):
        outcome = "closed"
    except TimeoutError:
        outcome = "nothing"
    finally:
        writer.close()
    sc.frames.note(sc.target_id, f"raw {name}: connection {outcome}")
    if data and len(data) >= 4 and struct.unpack(">i", data[:4])[0] == len(data) - 4:
        sc.check(
            outcome in ("closed", "answered"),
            f"the node reacts to a {name}",
            "an error response or the connection closed",
            f"{outcome} within the request timeout",
        )
    probe = KafkaClient(sc.target.host, sc.target.port, client_id="kraft-tck-probe", ssl=sc.target.ssl,
                        sasl=sc.target.sasl)
    try:
        await probe.connect(timeout_s=2)
    except RequestError as exc:
        sc.fail(f"after a {name} the node accepts new connections", "ApiVersions answered", str(exc))
    finally:
        await probe.close()
    mark = sc.frames.mark()
    await sc.expect_frame(
        lambda f: sc.from_target("Fetch", dst=a)(f) and f.part.get("CurrentLeaderEpoch") == epoch,
        sc.bound_ms(sc.timeouts.fetch_max_wait_ms + sc.timeouts.request_timeout_ms),
        f"after a {name} the node keeps its quorum role",
        f"Fetch(epoch={epoch}) to v{a}",
        mark,
    )


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


@case("PROTOCOL/Robustness/1")
async def test_garbage_body(sc: Scenario) -> None:
    await sc.make_follower()
    await abuse(sc, "Vote v0 with a garbage body", framed(header(B.VOTE, 0) + bytes(range(7, 250, 3))))


@case("PROTOCOL/Robustness/2")
async def test_truncated_frame(sc: Scenario) -> None:
    await sc.make_follower()
    await abuse(
        sc, "truncated frame (length 100, 10 bytes)", struct.pack(">i", 100) + header(B.VOTE, 0)[:10], hang_up=True
    )


@case("PROTOCOL/Robustness/3")
async def test_unknown_api_key(sc: Scenario) -> None:
    await sc.make_follower()
    await abuse(sc, "request with api key 9999", framed(header(9999, 0) + b"\x00"))


@case("PROTOCOL/Robustness/4")
async def test_unsupported_version(sc: Scenario) -> None:
    await sc.make_follower()
    await abuse(sc, "Vote v99", framed(header(B.VOTE, 99) + b"\x00\x00"))


@case("PROTOCOL/Robustness/5")
async def test_oversized_length(sc: Scenario) -> None:
    await sc.make_follower()
    await abuse(sc, "length prefix 0x7fffffff", struct.pack(">i", 0x7FFFFFFF) + b"\x00" * 16)
