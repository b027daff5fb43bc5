"""What TLS and SASL cost a 3-node reference quorum: commit latency and throughput, plaintext (the baseline)
beside TLS, mutual TLS, and mutual TLS with SASL (SCRAM-SHA-512) and the StandardAuthorizer on the controller
listener, in the same run.

Each variant is a fresh cluster of 3 node processes on loopback (no fsync) with the leader's closed-loop
workload: one 100-byte write at a time, the next once the last committed, so the figures are those of a
commit's critical path (a Fetch answer and the next Fetch cross TLS on every commit). Rounds alternate the
variants so that the machine's drift falls on all of them alike. Certificates are throw-away ones made with
openssl (``reference/certs.py``); the SCRAM accounts are formatted in (``bootstrap.checkpoint``, as
``kraft-tck format --add-scram``). SASL costs only at connection set-up (one SCRAM exchange per connection,
then no per-request work), and authorization one set lookup per request: the mTLS+SASL row shows whether
either is visible on the commit path.

    python bench/bench_tls.py [--rounds 2] [--window 8] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench_cluster import leader_report  # the same workload report, read the same way
from kraft_tck.reference.bootstrap import parse_add_scram, write_bootstrap
from kraft_tck.reference.certs import ThrowAwayCerts, throw_away_certs
from kraft_tck.reference.procs import LocalCluster, free_base_port
from kraft_tck.reference.security import ClientSecurity, client_security

SETTINGS = {
    "controller.quorum.election.timeout.ms": 500,
    "controller.quorum.fetch.timeout.ms": 1000,
    "controller.quorum.fetch.max.wait.ms": 500,
    "controller.quorum.append.linger.ms": 0,
}
VARIANTS = ("plaintext", "TLS", "mutual TLS", "mTLS+SASL")
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


@dataclass
class Result:
    variant: str
    writes_per_s: float
    p50: float
    p99: float
    p999: float


def settings_for(variant: str, certs: ThrowAwayCerts, node: int) -> dict[str, str]:
    if variant == "plaintext":
        return {}
    props = certs.node_properties(f"node-{node}", client_auth="none" if variant == "TLS" else "required")
    if variant == "mTLS+SASL":
        props |= {
            "listener.security.protocol.map": "CONTROLLER:SASL_SSL",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512", "sasl.mechanism.controller.protocol": "SCRAM-SHA-512",
            "listener.name.controller.scram-sha-512.sasl.jaas.config":
                f'{SCRAM} required username="node-{node}" password="node-{node}-secret";',
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:node-1;User:node-2;User:node-3",
        }
    return props


def describe_security(variant: str, certs: ThrowAwayCerts) -> ClientSecurity | None:
    """How the bench asks the quorum for its leader: the variant's protocol, as node 1."""
    if variant == "plaintext":
        return None
    props = {"security.protocol": "SASL_SSL" if variant == "mTLS+SASL" else "SSL",
             "ssl.truststore.location": str(certs.truststore), "ssl.keystore.location": str(certs.keystores["node-1"])}
    if variant == "mTLS+SASL":
        props |= {"sasl.mechanism": "SCRAM-SHA-512",
                  "sasl.jaas.config": f'{SCRAM} required username="node-1" password="node-1-secret";'}
    return client_security(props, "bench_tls")


def run_variant(root: Path, variant: str, certs: ThrowAwayCerts, warmup_s: float, window_s: float) -> Result:
    c = LocalCluster(root / variant.replace(" ", "-"), voters=3, base_port=free_base_port(3), settings=SETTINGS,
                     extra_args=["--closed-loop", "--record-size", "100", "--no-fsync"])
    c.prepare()
    accounts = [parse_add_scram(f"SCRAM-SHA-512=[name=node-{i},password=node-{i}-secret]") for i in (1, 2, 3)]
    for i in range(1, 4):  # each node its own keystore and login; the workload report needs no describe
        with open(c.config_path(i), "a", encoding="utf-8") as f:
            f.writelines(f"{k}={v}\n" for k, v in settings_for(variant, certs, i).items())
        if variant == "mTLS+SASL":  # what kraft-tck format --add-scram writes
            write_bootstrap(c.data_dir(i), accounts)
    c.client_security = describe_security(variant, certs)
    c.start_all()
    try:
        # An election first (a loaded machine may take longer than the warm-up), then writes: the reports
        # count from the SIGUSR1 below.
        asyncio.run(c.wait_for_leader(60))
        time.sleep(warmup_s)
        for proc in c.procs.values():
            proc.send_signal(signal.SIGUSR1)
        t0 = time.monotonic()
        time.sleep(window_s)
        elapsed = time.monotonic() - t0
    finally:
        c.stop_all(signal.SIGTERM)
    rep = leader_report(c)
    return Result(variant, rep["writes"] / elapsed, rep["p50"], rep["p99"], rep["p999"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3, help="rounds; each runs every variant once")
    ap.add_argument("--window", type=float, default=10.0, help="seconds measured per run, after the warm-up")
    ap.add_argument("--warmup", type=float, default=4.0, help="seconds before measuring (election, first writes)")
    ap.add_argument("--quick", action="store_true", help="one round of 4 s windows (make bench)")
    args = ap.parse_args(argv)
    rounds, window = (1, 4.0) if args.quick else (args.rounds, args.window)
    results: dict[str, list[Result]] = {v: [] for v in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="bench-tls-") as tmp:
        root = Path(tmp)
        certs = throw_away_certs(root / "certs", [f"node-{i}" for i in (1, 2, 3)])
        for r in range(rounds):
            order = VARIANTS if r % 2 == 0 else tuple(reversed(VARIANTS))
            for variant in order:
                res = run_variant(root / f"round-{r}", variant, certs, args.warmup, window)
                results[variant].append(res)
                print(f"round {r + 1} {variant:<10} {res.writes_per_s:8.0f} writes/s  p50 {res.p50:.2f} ms  "
                      f"p99 {res.p99:.2f} ms", file=sys.stderr, flush=True)
    base = statistics.median(x.p50 for x in results["plaintext"])
    base_rate = statistics.median(x.writes_per_s for x in results["plaintext"])
    print(f"\nCommit path of a 3-process quorum, closed loop, {rounds} round(s) of {window:.0f} s "
          "(medians over rounds; plaintext is the baseline)")
    print(f"{'variant':<12}{'writes/s':>10}{'vs plain':>10}{'p50 ms':>9}{'vs plain':>10}{'p99 ms':>9}{'p99.9 ms':>10}")
    for variant in VARIANTS:
        rs = results[variant]
        rate = statistics.median(x.writes_per_s for x in rs)
        p50 = statistics.median(x.p50 for x in rs)
        print(f"{variant:<12}{rate:>10.0f}{rate / base_rate:>9.2f}x{p50:>9.2f}{p50 / base:>9.2f}x"
              f"{statistics.median(x.p99 for x in rs):>9.2f}{statistics.median(x.p999 for x in rs):>10.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
