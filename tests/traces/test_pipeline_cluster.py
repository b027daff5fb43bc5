"""The cluster proof: a Spark standalone master and worker on loopback (from pyspark's own bin/spark-class),
the pipeline run against them with --master spark://127.0.0.1:PORT, and the same results as local mode.
Everything started here is stopped here, also when the test fails."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kraft_tck.reference.procs import free_base_port
from kraft_tck.traces.pipeline import synth
from kraft_tck.traces.pipeline.run import EXIT_VIOLATIONS, run_pipeline

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(420)]


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _wait(cond: Any, what: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.5)
    raise TimeoutError(f"timed out waiting for {what}")


def _alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as r:
            return int(json.load(r).get("aliveworkers", 0))
    except OSError:
        return 0


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = _spark_home()
    logs = tmp_path_factory.mktemp("spark-standalone")
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
           "SPARK_WORKER_DIR": str(logs / "work"), "SPARK_NO_DAEMONIZE": "1"}
    # Below the ephemeral range (free_base_port): a port-0 pick could be taken by a client socket first.
    port = free_base_port(3)
    ui, wui = port + 1, port + 2
    cls = str(home / "bin" / "spark-class")
    procs: list[subprocess.Popen[bytes]] = []
    master_log = open(logs / "master.log", "wb")  # noqa: SIM115 - closed in finally, outlives the with-less Popen
    worker_log = open(logs / "worker.log", "wb")  # noqa: SIM115
    try:
        procs.append(subprocess.Popen(
            [cls, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
             "--webui-port", str(ui)], env=env, stdout=master_log, stderr=subprocess.STDOUT))
        _wait(lambda: _alive_workers(ui) == 0 and _port_open(ui), "the master's web UI")
        procs.append(subprocess.Popen(
            [cls, "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}", "--host", "127.0.0.1",
             "--cores", "2", "--memory", "1g", "--webui-port", str(wui)],
            env=env, stdout=worker_log, stderr=subprocess.STDOUT))
        _wait(lambda: _alive_workers(ui) == 1, "the worker to register")
        yield f"spark://127.0.0.1:{port}"
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        master_log.close()
        worker_log.close()


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_cluster_mode_gives_the_same_results_as_local(standalone: str, spark: Any, tmp_path: Path) -> None:
    src = tmp_path / "in"
    synth.write_corpus(src, runs=2, events_per_run=600, seed=40)
    events = synth.synth_run("bad", 41, 600)
    synth.plant_two_leaders(events)
    synth.plant_diverging_records(events)
    synth.write_trace(src / "bad.ndjson", synth.header("bad", 41), events)
    with open(src / "bad.ndjson", "a", encoding="utf-8") as fh:  # the Python validator runs on the cluster too
        fh.write(json.dumps({"type": "event", "seq": len(events), "ts": 1, "node": 1, "event": "Send", "zz": 1}) + "\n")
    local = run_pipeline(spark, src, tmp_path / "local", validator=True, metrics=False, echo=lambda _: None)
    out = tmp_path / "cluster"
    # A separate driver process: the cluster session cannot share this process's local SparkSession.
    proc = subprocess.run(
        [sys.executable, "-c", "from kraft_tck.traces.cli import pipeline_cmd; pipeline_cmd()",
         "--input", str(src), "--out", str(out), "--master", standalone],
        capture_output=True, text=True, timeout=360, env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    assert proc.returncode == EXIT_VIOLATIONS == local.exit_code, proc.stdout + proc.stderr
    report = json.loads((out / "report.json").read_text())
    got = [(v["invariant"], v["run"], v["node"], v["epoch"], v["seq"]) for v in report["violations"]]
    assert got == [(v.invariant, v.run, v.node, v.epoch, v.seq) for v in local.violations]
    assert {v.invariant for v in local.violations} == {"ElectionSafety", "LogMatching"}
    assert report["summary"]["events accepted"] == local.counts["events accepted"]
    assert report["quarantine"] == local.quarantine and len(local.quarantine) == 1
    assert "'msg' is a required property" in local.quarantine[0]["reason"]
    assert [(v["file"], v["ok"]) for v in report["validation"]] == [(v.file, v.ok) for v in local.verdicts]
    assert "lines in" in proc.stdout
