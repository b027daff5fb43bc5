"""ApiVersions (KIP-511): the versions the target claims, and the fallback for an unknown version."""

from __future__ import annotations

import asyncio
import struct

from kraft_tck.conformance import bodies as B
from kraft_tck.conformance.cases import case
from kraft_tck.conformance.scenario import Scenario
from kraft_tck.spec import codec
from kraft_tck.spec.errors import Errors


@case("KIP-511/ApiVersions/1")
async def test_advertises_kraft_apis(sc: Scenario) -> None:
    client = await sc.v(0).connect()
    theirs = client.versions
    for name, key in B.KRAFT_APIS.items():
        rng = theirs.get(key)
        sc.check(
            rng is not None,
            f"ApiVersions lists {name} (api key {key})",
            f"{name} advertised",
            f"absent; advertised keys {sorted(theirs)}",
        )
        assert rng is not None
        sc.check(rng[0] <= rng[1], f"{name} range is well formed", "MinVersion <= MaxVersion", rng)
        ours = codec.supported_versions(key)
        common = min(ours[1], rng[1])
        sc.check(
            common >= max(ours[0], rng[0]),
            f"a version of {name} both sides speak",
            f"overlap with the harness's {ours}",
            rng,
        )
        sc.check(
            client.best_version(key) == common,
            f"the harness uses the highest common {name} version",
            str(common),
            client.best_version(key),
        )
    fetch_hi = theirs[B.FETCH][1]
    sc.check(
        fetch_hi >= B.MIN_FETCH_VERSION,
        "Fetch reaches the KRaft versions (LastFetchedEpoch, DivergingEpoch)",
        f"MaxVersion >= {B.MIN_FETCH_VERSION}",
        fetch_hi,
    )


@case("KIP-511/ApiVersions/2")
async def test_unknown_version_falls_back_to_v0(sc: Scenario) -> None:
    reader, writer = await sc.target.open_connection()
    client_id = b"kraft-tck"
    # Request header v1 (a v0 client cannot know the flexible layout of an unknown version).
    payload = struct.pack(">hhih", B.API_VERSIONS, 127, 4242, len(client_id)) + client_id
    sc.frames.note(sc.virtual_ids[0], "raw: ApiVersions v127 request")
    writer.write(struct.pack(">i", len(payload)) + payload)
    await writer.drain()
    try:
        head = await asyncio.wait_for(reader.readexactly(4), sc.bound_ms(1000) / 1000)
        (size,) = struct.unpack(">i", head)
        data = await asyncio.wait_for(reader.readexactly(size), 2)
    except (asyncio.IncompleteReadError, ConnectionError):
        sc.frames.note(sc.target_id, "connection closed without a response")
        sc.fail(
            "ApiVersions at an unknown version",
            "a v0 response with UNSUPPORTED_VERSION and the ranges",
            "the connection was closed",
        )
    except TimeoutError:
        sc.fail("ApiVersions at an unknown version", "a v0 response with UNSUPPORTED_VERSION", "no answer")
    finally:
        writer.close()
    corr, body = codec.decode_response(B.API_VERSIONS, 0, data)
    sc.frames.add(sc.target_id, sc.virtual_ids[0], B.API_VERSIONS, "response", 0, corr, body)
    sc.check(corr == 4242, "the response answers our correlation id", "4242", corr)
    sc.check(
        body["ErrorCode"] == Errors.UNSUPPORTED_VERSION,
        "the v0 fallback's error code",
        "UNSUPPORTED_VERSION (35)",
        B.error_name(body["ErrorCode"]),
    )
    keys = {k["ApiKey"] for k in body["ApiKeys"]}
    sc.check(
        B.API_VERSIONS in keys, "the fallback lists the supported ranges", "ApiVersions among the keys", sorted(keys)
    )
