"""``bootstrap.checkpoint``: the metadata records a node is formatted with (``kafka-storage format``).

Kafka's ``Formatter`` writes, into each log directory beside ``meta.properties``, a file named
``bootstrap.checkpoint`` in the format of a KRaft snapshot (Kafka's ``BootstrapDirectory.writeBinaryFile``
with a ``BatchFileWriter``): RecordBatch v2 batches at offsets from 0 in epoch 0, the first a control batch
holding a SnapshotHeaderRecord, then the metadata records, the last a control batch holding a
SnapshotFooterRecord. The records are a ``FeatureLevelRecord`` for ``metadata.version``
(``BootstrapMetadata.fromVersions``) and, with ``--add-scram``, one ``UserScramCredentialRecord`` per
argument (``ScramParser``): name, mechanism (1 = SCRAM-SHA-256, 2 = SCRAM-SHA-512), salt, StoredKey,
ServerKey and iterations; the password itself is not stored. The file is written to ``.tmp`` and renamed
over the old one, as Kafka does.

Kafka's active controller copies the bootstrap records into the empty metadata log on first start, and
every controller then knows the credentials by replaying the log. This node keeps no SCRAM records in its
log: it reads the credentials of its own ``bootstrap.checkpoint`` at start (format every voter with the
same ``--add-scram`` arguments, as Kafka's documentation asks for credentials needed before the quorum
runs). Salted keys come from ``scramp`` (RFC 5802's Hi); a given ``saltedpassword`` is keyed with the
standard library's ``hmac``.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from kraft_tck.spec import codec
from kraft_tck.spec.errors import DecodeError
from kraft_tck.spec.records import (
    ControlType,
    Record,
    RecordBatch,
    control_batch,
    decode_batches,
    decode_control,
    encode_batches,
)

if TYPE_CHECKING:
    from kraft_tck.reference.voters import VoterSet

BOOTSTRAP_FILE = "bootstrap.checkpoint"
#: metadata.version written by format: Kafka 3.9's latest production level, 3.9-IV0 (Kafka's
#: MetadataVersion.IBP_3_9_IV0). SCRAM records need 3.5-IV2 (level 11) or later (Formatter).
METADATA_VERSION_LEVEL = 21
SCRAM_MIN_METADATA_VERSION = 11
#: Kafka's ScramMechanism: the type byte of UserScramCredentialRecord.Mechanism, and the iteration bounds.
SCRAM_TYPES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
SCRAM_ITERATIONS = (4096, 16384)
DEFAULT_ITERATIONS = 4096


class BootstrapError(ValueError):
    """An --add-scram argument or a bootstrap.checkpoint that cannot be used; the message says which."""


@dataclass(frozen=True)
class ScramCredential:
    """One UserScramCredentialRecord: what a SCRAM server needs to check a login (never the password)."""

    mechanism: str  # SCRAM-SHA-256 | SCRAM-SHA-512
    name: str
    salt: bytes = field(repr=False)
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int

    def record(self) -> dict[str, object]:
        return {"Name": self.name, "Mechanism": SCRAM_TYPES[self.mechanism], "Salt": self.salt,
                "StoredKey": self.stored_key, "ServerKey": self.server_key, "Iterations": self.iterations}


# ============================================================================================ --add-scram


def _component(text: str) -> tuple[str, str]:
    """``key=value`` of one ``[...]`` component; a value in double quotes loses them (ScramParser)."""
    key, sep, value = text.partition("=")
    if not sep:
        raise BootstrapError(f"No equals sign found in SCRAM component: {text}")
    if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
        value = value[1:-1]
    return key, value


def _b64(value: str, what: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise BootstrapError(f"Failed to decode given {what}: {value}") from None


@dataclass(frozen=True)
class ScramArgument:
    """One ``--add-scram`` argument as read, before salting: a password, or a salt with a salted password."""

    mechanism: str
    name: str
    password: str | None = field(repr=False)
    salt: bytes | None = field(repr=False)
    salted_password: bytes | None = field(repr=False)
    iterations: int

    def credential(self, salt: bytes | None = None) -> ScramCredential:
        """The credential: RFC 5802's keys from the password (``scramp``) with the given salt, else a random
        one (Kafka's ScramFormatter.secureRandomBytes), or from the given salted password."""
        import scramp

        use_salt = self.salt if self.salt is not None else salt
        if self.password is None:
            assert self.salted_password is not None and use_salt is not None
            # StoredKey = H(HMAC(sp, "Client Key")), ServerKey = HMAC(sp, "Server Key"), with the mechanism's
            # hash (Kafka's ScramFormatter; scramp's hash function, the standard library's hmac).
            hf = scramp.ScramMechanism(self.mechanism).hf
            stored = hf(hmac.new(self.salted_password, b"Client Key", hf).digest()).digest()
            server = hmac.new(self.salted_password, b"Server Key", hf).digest()
            return ScramCredential(self.mechanism, self.name, use_salt, stored, server, self.iterations)
        salt_out, stored, server, _ = scramp.ScramMechanism(self.mechanism).make_auth_info(
            self.password, iteration_count=self.iterations, salt=use_salt)
        return ScramCredential(self.mechanism, self.name, salt_out, stored, server, self.iterations)


def parse_scram_argument(argument: str) -> ScramArgument:
    """One ``--add-scram`` argument, ``SCRAM-SHA-256=[name=alice,password=alice-secret]``, as Kafka's
    ``ScramParser`` reads it: ``name``, ``password`` or ``salt`` + ``saltedpassword`` (base64),
    ``iterations`` (4096 by default, within ScramMechanism's bounds); components split at commas, a value's
    double quotes dropped, unknown components refused; Kafka's messages."""
    text = argument.strip()
    mech, eq, config = text.partition("=")
    if not eq:
        raise BootstrapError(f"Failed to find equals sign in SCRAM argument '{text}'")
    if mech not in SCRAM_TYPES:
        raise BootstrapError(f"The add-scram mechanism {mech} is not supported.")
    if not config.startswith("["):
        raise BootstrapError("Expected configuration string to start with [")
    if not config.endswith("]"):
        raise BootstrapError("Expected configuration string to end with ]")
    parts = dict(_component(c) for c in config[1:-1].split(","))
    name = parts.pop("name", None)
    if name is None:
        raise BootstrapError("You must supply 'name' to add-scram")
    salt = _b64(parts.pop("salt"), "salt") if "salt" in parts else None
    iterations_text = parts.pop("iterations", None)
    try:
        iterations = DEFAULT_ITERATIONS if iterations_text is None else int(iterations_text)
    except ValueError:
        raise BootstrapError(f"Failed to parse iterations count: {iterations_text}") from None
    password = parts.pop("password", None)
    salted_text = parts.pop("saltedpassword", None)
    salted: bytes | None = None
    if password is None:
        if salted_text is None:
            raise BootstrapError("You must supply one of 'password' or 'saltedpassword' to add-scram")
        if salt is None:
            raise BootstrapError("You must supply 'salt' with 'saltedpassword' to add-scram")
        salted = _b64(salted_text, "saltedPassword")
    if parts:
        raise BootstrapError(f"Unknown SCRAM configurations: {', '.join(sorted(parts))}")
    low, high = SCRAM_ITERATIONS
    if iterations < low:
        raise BootstrapError(f"The 'iterations' value must be >= {low} for add-scram using {mech}")
    if iterations > high:
        raise BootstrapError(f"The 'iterations' value must be <= {high} for add-scram using {mech}")
    return ScramArgument(mech, name, password, salt, salted, iterations)


def parse_add_scram(argument: str, salt: bytes | None = None) -> ScramCredential:
    """:func:`parse_scram_argument`, salted into a credential (``salt`` fixes a salt the argument does not
    give; otherwise it is random, as Kafka's)."""
    return parse_scram_argument(argument).credential(salt)


# ============================================================================================ the file


def bootstrap_batches(credentials: tuple[ScramCredential, ...] | list[ScramCredential],
                      metadata_version: int = METADATA_VERSION_LEVEL, timestamp_ms: int | None = None
                      ) -> list[RecordBatch]:
    """Header batch (offset 0), one batch of metadata records (offsets 1..n), footer batch (n+1); epoch 0,
    as Kafka's ``BatchFileWriter``."""
    now = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    if credentials and metadata_version < SCRAM_MIN_METADATA_VERSION:
        raise BootstrapError(f"SCRAM is only supported in metadata.version 3.5-IV2 (level "
                             f"{SCRAM_MIN_METADATA_VERSION}) or later")
    values = [codec.encode_metadata_record("FeatureLevelRecord", 0,
                                           {"Name": "metadata.version", "FeatureLevel": metadata_version})]
    values += [codec.encode_metadata_record("UserScramCredentialRecord", 0, c.record()) for c in credentials]
    header = control_batch(0, 0, ControlType.SNAPSHOT_HEADER, {"Version": 0, "LastContainedLogTimestamp": 0}, now)
    data = RecordBatch(1, 0, tuple(Record(i, v) for i, v in enumerate(values)), base_timestamp=now,
                       max_timestamp=now)
    footer = control_batch(1 + len(values), 0, ControlType.SNAPSHOT_FOOTER, {"Version": 0}, now)
    return [header, data, footer]


def write_bootstrap(directory: Path, credentials: tuple[ScramCredential, ...] | list[ScramCredential],
                    metadata_version: int = METADATA_VERSION_LEVEL) -> Path:
    """``directory/bootstrap.checkpoint``, written to ``.tmp``, fsynced and renamed over any old one."""
    data = encode_batches(bootstrap_batches(credentials, metadata_version))
    path = directory / BOOTSTRAP_FILE
    tmp = directory / (BOOTSTRAP_FILE + ".tmp")
    tmp.unlink(missing_ok=True)
    try:
        with open(tmp, "xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


@dataclass(frozen=True)
class BootstrapMetadata:
    """What a bootstrap.checkpoint holds: metadata.version and the SCRAM credentials."""

    metadata_version: int
    credentials: tuple[ScramCredential, ...]
    #: (name, version) of every metadata record, in order (for tools and tests).
    records: tuple[tuple[str, int], ...] = ()


def read_bootstrap(directory: Path) -> BootstrapMetadata | None:
    """The bootstrap metadata of ``directory`` (None when it has no bootstrap.checkpoint). A file that is
    not a whole snapshot (header first, footer last, every batch's CRC right) or holds a record this node
    cannot read is refused naming the file."""
    path = directory / BOOTSTRAP_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BootstrapError(f"{path}: {exc.strerror or exc}") from None
    try:
        batches = decode_batches(data)
        if not batches or not batches[0].is_control or not batches[-1].is_control:
            raise BootstrapError(f"{path}: not a snapshot (no header or no footer control batch): a torn "
                                 "write? format the directory again")
        first, last = decode_control(batches[0].records[0]), decode_control(batches[-1].records[-1])
        if first[0] != ControlType.SNAPSHOT_HEADER or last[0] != ControlType.SNAPSHOT_FOOTER:
            raise BootstrapError(f"{path}: the first batch is not a SnapshotHeaderRecord or the last not a "
                                 "SnapshotFooterRecord")
        level: int | None = None
        creds: list[ScramCredential] = []
        names: list[tuple[str, int]] = []
        for batch in batches:
            if batch.is_control:
                continue
            for rec in batch.records:
                if rec.value is None:
                    raise BootstrapError(f"{path}: a metadata record without a value")
                name, version, body = codec.decode_metadata_record(rec.value)
                names.append((name, version))
                if name == "FeatureLevelRecord" and body["Name"] == "metadata.version":
                    level = int(body["FeatureLevel"])
                elif name == "UserScramCredentialRecord":
                    mech = {v: k for k, v in SCRAM_TYPES.items()}.get(int(body["Mechanism"]))
                    if mech is None:
                        raise BootstrapError(f"{path}: UserScramCredentialRecord for {body['Name']!r} has unknown "
                                             f"mechanism type {body['Mechanism']}")
                    creds.append(ScramCredential(mech, str(body["Name"]), bytes(body["Salt"]),
                                                 bytes(body["StoredKey"]), bytes(body["ServerKey"]),
                                                 int(body["Iterations"])))
    except DecodeError as exc:
        raise BootstrapError(f"{path}: cannot be read as snapshot batches ({exc})") from None
    if level is None:
        # BootstrapMetadata.fromRecords: the file must set metadata.version.
        raise BootstrapError(f"{path}: no FeatureLevelRecord for metadata.version")
    return BootstrapMetadata(level, tuple(creds), tuple(names))


def metadata_dir_of(props: dict[str, str] | None = None, *, metadata_log_dir: str | None = None,
                    log_dirs: str | None = None) -> Path | None:
    """Kafka's metadata log directory: ``metadata.log.dir``, else the first of ``log.dirs`` (``log.dir``)."""
    p = props or {}
    for raw in (metadata_log_dir, p.get("metadata.log.dir"), log_dirs, p.get("log.dirs"), p.get("log.dir")):
        if raw and raw.strip():
            first = re.split(r"\s*,\s*", raw.strip())[0]
            if first:
                return Path(first)
    return None


# ============================================================================================ KIP-853 bootstrap


#: The metadata log's partition directory, below the metadata log directory (Kafka's ``__cluster_metadata-0``).
METADATA_PARTITION_DIR = "__cluster_metadata-0"
#: Kafka's ``Snapshots.BOOTSTRAP_SNAPSHOT_ID`` (0, 0) as a file name: the bootstrap checkpoint.
BOOTSTRAP_CHECKPOINT = "00000000000000000000-0000000000.checkpoint"
KRAFT_VERSION_FEATURE = "kraft.version"
#: The kraft.version levels this node supports (Kafka's KRaftVersion: 0 static, 1 KIP-853) and the
#: metadata.version kraft.version 1 needs (``KRaftVersion.KRAFT_VERSION_1``: 3.9-IV0, level 21).
KRAFT_VERSIONS = (0, 1)
KRAFT_VERSION_1_MIN_METADATA_VERSION = 21


@dataclass(frozen=True)
class DynamicVoter:
    """One ``id@host:port:directoryId`` of ``--initial-controllers`` (Kafka's ``DynamicVoter``)."""

    node_id: int
    host: str
    port: int
    directory_id: str  # Kafka's Uuid string

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.node_id}@{host}:{self.port}:{self.directory_id}"


def _java_int(text: str) -> int | None:
    """``Integer.parseInt``: an optional sign and decimal digits within int32; None otherwise."""
    if not re.fullmatch(r"[+-]?\d+", text):
        return None
    value = int(text)
    return value if -(2**31) <= value < 2**31 else None


def parse_kafka_uuid(text: str) -> str | None:
    """``Uuid.fromString``: URL-safe base64 of 16 bytes (22 characters, no padding); the text, else None."""
    if len(text) != 22 or not re.fullmatch(r"[A-Za-z0-9_-]{22}", text):
        return None
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (binascii.Error, ValueError):
        return None
    return text if len(raw) == 16 else None


def parse_dynamic_voter(text: str) -> DynamicVoter:
    """One voter as Kafka's ``DynamicVoter.parse`` reads it, with its messages (BootstrapError)."""
    rest = text.strip()
    at = rest.find("@")
    if at < 0:
        raise BootstrapError("No @ found in dynamic voter string.")
    if at == 0:
        raise BootstrapError("Invalid @ at beginning of dynamic voter string.")
    node_id = _java_int(rest[:at])
    if node_id is None:
        raise BootstrapError("Failed to parse node id in dynamic voter string.")
    if node_id < 0:
        raise BootstrapError(f"Invalid negative node id {node_id} in dynamic voter string.")
    rest = rest[at + 1:]
    if not rest:
        raise BootstrapError("No hostname found after node id.")
    if rest.startswith("["):
        end = rest.find("]")
        if end < 0:
            raise BootstrapError("Hostname began with left bracket, but no right bracket was found.")
        host, rest = rest[1:end], rest[end + 1:]
    else:
        colon = rest.find(":")
        if colon < 0:
            raise BootstrapError("No colon following hostname could be found.")
        host, rest = rest[:colon], rest[colon:]
    if not rest.startswith(":"):
        raise BootstrapError("Port section must start with a colon.")
    rest = rest[1:]
    colon = rest.find(":")
    if colon < 0:
        raise BootstrapError("No colon following port could be found.")
    port = _java_int(rest[:colon])
    if port is None:
        raise BootstrapError("Failed to parse port in dynamic voter string.")
    if not 0 <= port <= 65535:
        raise BootstrapError(f"Invalid port {port} in dynamic voter string.")
    directory_id = parse_kafka_uuid(rest[colon + 1:])
    if directory_id is None:
        raise BootstrapError("Failed to parse directory ID in dynamic voter string.")
    return DynamicVoter(node_id, host, port, directory_id)


def parse_dynamic_voters(text: str) -> tuple[DynamicVoter, ...]:
    """``--initial-controllers`` as Kafka's ``DynamicVoters.parse``: comma-separated voters (empty items
    skipped), at least one, each node id once; sorted by node id (Kafka keeps them in a TreeMap)."""
    voters = [parse_dynamic_voter(item) for item in text.strip().split(",") if item]
    if not voters:
        raise BootstrapError("No voters given.")
    seen: set[int] = set()
    for v in voters:
        if v.node_id in seen:
            raise BootstrapError(f"Node id {v.node_id} was specified more than once.")
        seen.add(v.node_id)
    return tuple(sorted(voters, key=lambda v: v.node_id))


def voters_record_body(voters: tuple[DynamicVoter, ...] | list[DynamicVoter], listener_name: str
                       ) -> dict[str, object]:
    """The VotersRecord of the initial voters (``DynamicVoters.toVoterSet`` + ``VoterSet.toVotersRecord``): each
    voter's key, one endpoint on the controller listener name, supported kraft.version 0..1, in id order."""
    import uuid

    return {"Version": 0, "Voters": [
        {"VoterId": v.node_id,
         "VoterDirectoryId": uuid.UUID(bytes=base64.urlsafe_b64decode(v.directory_id + "==")),
         "Endpoints": [{"Name": listener_name, "Host": v.host, "Port": v.port}],
         "KRaftVersionFeature": {"MinSupportedVersion": 0, "MaxSupportedVersion": 1}}
        for v in sorted(voters, key=lambda v: v.node_id)]}


def initial_voter_set(voters: tuple[DynamicVoter, ...] | list[DynamicVoter], listener_name: str) -> VoterSet:
    """``DynamicVoters.toVoterSet``: the initial voters as a ``voters.VoterSet`` (what the checkpoint holds)."""
    from kraft_tck.reference.voters import voter_set_from_record

    return voter_set_from_record(voters_record_body(voters, listener_name))


def dynamic_quorum_snapshot(voters: tuple[DynamicVoter, ...] | list[DynamicVoter], listener_name: str,
                            kraft_version: int = 1, timestamp_ms: int | None = None) -> bytes:
    """The bytes of the bootstrap checkpoint (Kafka's ``Formatter.writeDynamicQuorumSnapshot``): one control
    batch at offset 0, epoch 0, of SnapshotHeaderRecord (LastContainedLogTimestamp = now), KRaftVersionRecord
    and VotersRecord, then the SnapshotFooterRecord batch."""
    from kraft_tck.reference.snapshot import BOOTSTRAP_SNAPSHOT_ID, encode_snapshot

    now = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    return encode_snapshot(BOOTSTRAP_SNAPSHOT_ID, [], last_contained_log_timestamp=now, timestamp_ms=now,
                           kraft_version=kraft_version, voters=voters_record_body(voters, listener_name))


def write_dynamic_quorum_snapshot(metadata_dir: Path, voters: tuple[DynamicVoter, ...] | list[DynamicVoter],
                                  listener_name: str, kraft_version: int = 1) -> Path:
    """``<metadata_dir>/__cluster_metadata-0/00000000000000000000-0000000000.checkpoint``, written to
    ``.checkpoint.part``, fsynced and renamed (Kafka's ``FileRawSnapshotWriter.freeze``)."""
    partition = metadata_dir / METADATA_PARTITION_DIR
    partition.mkdir(parents=True, exist_ok=True)
    path = partition / BOOTSTRAP_CHECKPOINT
    tmp = partition / (BOOTSTRAP_CHECKPOINT + ".part")
    tmp.unlink(missing_ok=True)
    try:
        with open(tmp, "xb") as f:
            f.write(dynamic_quorum_snapshot(voters, listener_name, kraft_version))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fd = os.open(partition, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return path


@dataclass(frozen=True)
class BootstrapVoters:
    """What the bootstrap checkpoint holds: kraft.version and the initial voter set (``voters.VoterSet``)."""

    kraft_version: int
    voters: VoterSet


def read_bootstrap_checkpoint(log_dir: Path) -> BootstrapVoters | None:
    """The bootstrap checkpoint of the metadata log directory ``log_dir`` (None when there is none: a static
    quorum, or ``--no-initial-controllers``). A file that is not a whole snapshot (CRC, header first, footer
    last, epoch 0), holds data records, or lacks the KRaftVersionRecord (level 1) or the VotersRecord is
    refused with BootstrapError naming the file."""
    from kraft_tck.reference.snapshot import BOOTSTRAP_SNAPSHOT_ID, decode_snapshot
    from kraft_tck.reference.storage import CorruptFileError

    path = Path(log_dir) / METADATA_PARTITION_DIR / BOOTSTRAP_CHECKPOINT
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BootstrapError(f"{path}: cannot read the bootstrap checkpoint: {exc.strerror or exc}") from None
    try:
        snap = decode_snapshot(path, data, BOOTSTRAP_SNAPSHOT_ID)
    except CorruptFileError as exc:
        raise BootstrapError(f"{path}: not a valid bootstrap checkpoint: {exc.problem}; format the directory "
                             "again (kraft-tck format --standalone or --initial-controllers)") from None
    if snap.batches:
        raise BootstrapError(f"{path}: the bootstrap checkpoint holds {snap.record_count} data record(s) besides "
                             "its control records; Kafka's format writes none")
    if snap.kraft_version not in KRAFT_VERSIONS or snap.kraft_version == 0:
        raise BootstrapError(f"{path}: the bootstrap checkpoint has no KRaftVersionRecord with kraft.version 1 "
                             f"(found {snap.kraft_version}): this node supports kraft.version 0 and 1, and "
                             "a dynamic quorum is 1")
    if snap.voters is None or not snap.voters.nodes:
        raise BootstrapError(f"{path}: the bootstrap checkpoint has no VotersRecord with at least one voter")
    return BootstrapVoters(snap.kraft_version, snap.voters)


def read_bootstrap_voters(log_dir: Path) -> VoterSet | None:
    """The initial voter set (``voters.VoterSet``) of the bootstrap checkpoint in the metadata log directory
    ``log_dir``, or None when there is none (KIP-853 "Bootstrapping"; Kafka's ``KafkaRaftClient`` reads it as the
    snapshot at (0, 0), ``testFollowerReadsKRaftBootstrapRecords``). Validation errors name the file
    (BootstrapError)."""
    found = read_bootstrap_checkpoint(log_dir)
    return None if found is None else found.voters
