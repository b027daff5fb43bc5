"""A secured controller listener (``--target-command-config``): TLS refuses plaintext, SASL refuses who has not
logged in, authorization refuses a principal without CLUSTER_ACTION (Kafka's ``ControllerApis``), and a valid
peer is served. Each case is skipped, naming what to pass, when the target is not secured that way."""

from __future__ import annotations

import asyncio
import struct

from kraft_tck.conformance import bodies as B
from kraft_tck.conformance.cases import case
from kraft_tck.conformance.scenario import Scenario
from kraft_tck.conformance.security import Login, TargetSecurity, authenticate_stream
from kraft_tck.conformance.transport import KafkaClient, RequestError
from kraft_tck.spec import codec
from kraft_tck.spec.errors import Errors

NEEDS = "--target-command-config"


def _security(sc: Scenario) -> TargetSecurity:
    sec = sc.target.security
    if sec is None:
        sc.skip(f"the target is tested in plaintext: give {NEEDS} FILE for a secured target")
    return sec


async def _still_follows(sc: Scenario, leader: int, epoch: int, what: str) -> None:
    mark = sc.frames.mark()
    await sc.expect_frame(
        lambda f: sc.from_target("Fetch", dst=leader)(f) and f.part.get("CurrentLeaderEpoch") == epoch,
        sc.bound_ms(sc.timeouts.fetch_max_wait_ms + sc.timeouts.request_timeout_ms),
        what, f"Fetch(epoch={epoch}) to v{leader}", mark)


@case("PROTOCOL/Security/1")
async def test_tls_target_refuses_plaintext(sc: Scenario) -> None:
    if not _security(sc).tls:
        sc.skip(f"the target does not speak TLS: give {NEEDS} with security.protocol=SSL or SASL_SSL")
    leader = sc.virtual_ids[0]
    epoch = await sc.make_follower(leader)
    reader, writer = await asyncio.open_connection(sc.target.host, sc.target.port)
    sc.frames.note(leader, "raw plaintext ApiVersions v0 to the TLS listener")
    writer.write(codec.encode_request(B.API_VERSIONS, 0, 4711, "kraft-tck-plaintext", {}))
    await writer.drain()
    outcome = "no answer"
    try:
        head = await asyncio.wait_for(reader.readexactly(4), sc.bound_ms(sc.timeouts.request_timeout_ms) / 1000)
        (size,) = struct.unpack(">i", head)
        data = await asyncio.wait_for(reader.readexactly(size), 2) if 4 <= size <= 1 << 20 else b""
        corr, _ = codec.decode_response(B.API_VERSIONS, 0, data)
        outcome = f"an ApiVersions response (correlation id {corr})" if corr == 4711 else "bytes that are not one"
    except (asyncio.IncompleteReadError, ConnectionError, OSError):
        outcome = "the connection closed"
    except TimeoutError:
        outcome = "no answer"
    except Exception:  # a TLS alert or anything else that does not decode as a response
        outcome = "bytes that are not one"
    finally:
        writer.close()
    sc.frames.note(sc.target_id, f"plaintext client: {outcome}")
    sc.check(not outcome.startswith("an ApiVersions"), "a TLS listener does not serve a plaintext client",
             "no ApiVersions response", outcome)
    await _still_follows(sc, leader, epoch, "after a plaintext client the node keeps its role")


async def _tls_connection(sc: Scenario) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    ctx = sc.target.ssl
    return await asyncio.open_connection(sc.target.host, sc.target.port, ssl=ctx,
                                         server_hostname=sc.target.host if ctx else None)


@case("PROTOCOL/Security/2")
async def test_sasl_before_login_and_wrong_password(sc: Scenario) -> None:
    sec = _security(sc)
    if not sec.sasl or sec.login is None:
        sc.skip(f"the target does not speak SASL: give {NEEDS} with security.protocol=SASL_SSL or SASL_PLAINTEXT")
    leader, other = sc.virtual_ids[0], sc.virtual_ids[-1]
    epoch = await sc.make_follower(leader)
    reader, writer = await _tls_connection(sc)
    vote = B.vote_request(sc.q.cluster_id, epoch + 1, other, epoch, 1 << 20, sc.target_id)
    sc.frames.note(other, f"Vote(epoch={epoch + 1}) before any SASL login")
    writer.write(codec.encode_request(B.VOTE, 0, 4712, "kraft-tck-nologin", vote))
    await writer.drain()
    try:
        got = await asyncio.wait_for(reader.read(4), sc.bound_ms(sc.timeouts.request_timeout_ms) / 1000)
        outcome = "the connection closed" if not got else "an answer"
    except (ConnectionError, OSError):
        outcome = "the connection closed"
    except TimeoutError:
        outcome = "no answer, the connection still open"
    finally:
        writer.close()
    sc.frames.note(sc.target_id, f"Vote before the login: {outcome}")
    sc.check(outcome == "the connection closed", "a request before the SASL login closes the connection "
             "(Kafka's SaslServerAuthenticator: IllegalSaslStateException)", "the connection closed", outcome)
    reader, writer = await _tls_connection(sc)
    wrong = Login(sec.login.mechanism, sec.login.username, sec.login.password + "-wrong")
    try:
        await authenticate_stream(reader, writer, wrong, f"{sc.target.host}:{sc.target.port}", 10)
        refused = "the login succeeded"
    except Exception as exc:
        refused = str(exc)
    finally:
        writer.close()
    sc.frames.note(sc.target_id, f"wrong password: {refused}")
    sc.check(f"error {int(Errors.SASL_AUTHENTICATION_FAILED)}" in refused or "closed the connection" in refused,
             "a wrong password is refused", "SaslAuthenticate answered SASL_AUTHENTICATION_FAILED", refused)
    await _still_follows(sc, leader, epoch, "after the refused logins the node keeps its role")


@case("PROTOCOL/Security/3")
async def test_unauthorized_vote_and_fetch_change_nothing(sc: Scenario) -> None:
    sec = _security(sc)
    ctx = sec.unauthorized_context() if sec.tls else None
    login = sec.unauthorized_login if sec.sasl else None
    if (sec.sasl and login is None) or (not sec.sasl and ctx is None):
        sc.skip(f"no unauthorized identity: give kraft-tck.unauthorized.sasl.jaas.config (SASL) or "
                f"kraft-tck.unauthorized.ssl.keystore.location (mutual TLS) in {NEEDS}: one the target "
                "authenticates but does not allow CLUSTER_ACTION")
    leader, other = sc.virtual_ids[0], sc.virtual_ids[-1]
    epoch = await sc.make_follower(leader)
    client = KafkaClient(sc.target.host, sc.target.port, client_id="kraft-tck-unauthorized",
                         ssl=ctx if sec.tls else None, sasl=login)
    if sec.tls and ctx is None:
        client.ssl = sc.target.ssl  # SASL_SSL with only an unauthorized login: the harness's own TLS identity
    try:
        await client.connect(timeout_s=5)
    except RequestError as exc:
        sc.fail("the unauthorized identity is authenticated (the case needs it to reach authorization)",
                "ApiVersions answered after the login", str(exc))
    try:
        v = client.best_version(B.VOTE)
        body = B.vote_request(sc.q.cluster_id, epoch + 1, other, epoch, 1 << 20, sc.target_id)
        sc.frames.note(other, f"unauthorized Vote(epoch={epoch + 1}, candidate=v{other})")
        resp = await sc.call("an unauthorized Vote", client.request(B.VOTE, v, body, 5))
        sc.frames.note(sc.target_id, f"unauthorized Vote: ErrorCode {B.error_name(resp['ErrorCode'])}")
        sc.check(resp["ErrorCode"] == Errors.CLUSTER_AUTHORIZATION_FAILED, "a Vote without CLUSTER_ACTION is refused",
                 "ErrorCode CLUSTER_AUTHORIZATION_FAILED", B.error_name(resp["ErrorCode"]))
        fv = client.best_version(B.FETCH)
        body = B.fetch_request(fv, sc.q.cluster_id, other, epoch, 0, 0)
        sc.frames.note(other, f"unauthorized Fetch as replica v{other} in epoch {epoch}")
        resp = await sc.call("an unauthorized Fetch", client.request(B.FETCH, fv, body, 5))
        sc.frames.note(sc.target_id, f"unauthorized Fetch: ErrorCode {B.error_name(resp['ErrorCode'])}")
        sc.check(resp["ErrorCode"] == Errors.CLUSTER_AUTHORIZATION_FAILED,
                 "a Fetch without CLUSTER_ACTION is refused", "ErrorCode CLUSTER_AUTHORIZATION_FAILED",
                 B.error_name(resp["ErrorCode"]))
    finally:
        await client.close()
    await _still_follows(sc, leader, epoch, "an unauthorized Vote for a new epoch changes nothing")


@case("PROTOCOL/Security/4")
async def test_valid_peer_is_served(sc: Scenario) -> None:
    sec = _security(sc)
    if not sec.sasl and not (sec.tls and sec.keystore is not None):
        sc.skip(f"the target has no peer authentication to check: give {NEEDS} with ssl.keystore.location "
                "(mutual TLS) or a SASL login")
    await sc.make_follower(sc.virtual_ids[0])  # the target reached v2 over its own secured connection
    # A candidate of the next epoch with the same log (as KIP-595/Vote/1), on the harness's secured connection.
    log, e = sc.q.log, sc.q.next_epoch()
    resp = await sc.call("a Vote from a valid peer", sc.v(1).vote(e, log.last_epoch, log.end))
    sc.check(resp["ErrorCode"] != Errors.CLUSTER_AUTHORIZATION_FAILED, "a valid peer's Vote is served",
             "a VoteResponse that is not CLUSTER_AUTHORIZATION_FAILED", B.error_name(resp["ErrorCode"]))
    part = B.partition_or_none(resp)
    sc.check(part is not None and part.get("LeaderEpoch") == e, "the valid peer's Vote is decided as any other",
             f"a VoteResponse for epoch {e}", part)
