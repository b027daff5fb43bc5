"""The one SparkSession builder: local[*] by default, sized for a small (2-core, 24 GiB) machine.

Any Spark master URL works (`spark://host:port`, `yarn`, `k8s://...`); the settings below only matter
where Spark leaves them to the application.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from kraft_tck.traces.pipeline import jvm

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"

#: Settings for one small machine (2 cores, 24 GiB), measured with bench/bench_pipeline.py:
#: * local mode runs executors inside the driver JVM, so the driver's heap is the executors' heap: 8 GiB
#:   leaves the rest of the machine to the Python workers, the OS page cache and the other tools;
#: * shuffle partitions: the default 200 makes hundreds of tiny tasks; 2 cores want a handful, and AQE
#:   coalesces them further (and turns small joins into broadcasts);
#: * splits of 64 MiB keep both cores busy on a few hundred MiB of traces;
#: * a few concurrent Parquet writers per task instead of a sort of every row by (status, source, run);
#: * partition values (run ids such as "1" or "2024") stay strings when tables are read back;
#: * the UI is off: several sessions (tests, benchmarks) share the host and would race for port 4040;
#: * Arrow (`spark.sql.execution.arrow.pyspark.enabled`) only takes effect when pyarrow is installed.
DEFAULT_CONF: dict[str, str] = {
    "spark.driver.memory": "8g",
    "spark.executor.memory": "2g",
    "spark.sql.shuffle.partitions": "8",
    "spark.default.parallelism": "4",
    "spark.sql.files.maxPartitionBytes": "64m",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.adaptive.coalescePartitions.enabled": "true",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.maxConcurrentOutputFileWriters": "8",
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
    # The parsed event struct has more than the default 100 nested fields, the limit above which Spark
    # gives up whole-stage code generation for a stage.
    "spark.sql.codegen.maxFields": "2000",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.compression.codec": "snappy",
    # The per-line schema check is one huge expression. Fused into one whole-stage method (38 KB of
    # bytecode) HotSpot gives up on it ("out of nodes", "out of virtual registers") and interprets it;
    # above 8000 bytes Spark instead compiles that stage operator by operator, its expressions split into
    # small methods the JIT does compile (bench_pipeline, 200k events: ingest 48 s -> 28 s, CPU -25%).
    "spark.sql.codegen.hugeMethodLimit": "8000",
    # Any generated method still above 8000 bytes (outside whole-stage code) is compiled, not interpreted.
    "spark.driver.extraJavaOptions": "-XX:+UseG1GC -XX:-DontCompileHugeMethods",
    "spark.executor.extraJavaOptions": "-XX:-DontCompileHugeMethods",
    "spark.python.worker.reuse": "true",
}


def build_session(
    master: str | None = None, app_name: str = "kraft-tck-pipeline", conf: dict[str, str] | None = None
) -> SparkSession:
    """A SparkSession on `master` (local[*] when None), quiet logs, the same Python on driver and workers."""
    from pyspark.sql import SparkSession

    # Executors must run the interpreter that has kraft_tck installed (the venv), not whatever `python3`
    # is on PATH; on a real cluster the operator sets PYSPARK_PYTHON and we leave it alone.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master or DEFAULT_MASTER).appName(app_name)
    settings = dict(DEFAULT_CONF)
    if not master or master.startswith("local"):
        # Local mode talks only to itself: keep the driver on loopback instead of whatever address the
        # hostname resolves to (a multi-host cluster needs a reachable driver; there we leave it alone).
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        settings.setdefault("spark.driver.host", "127.0.0.1")
        settings.setdefault("spark.driver.bindAddress", "127.0.0.1")
    if master and not master.startswith("local"):
        # A small standalone worker (the cluster proof runs one with 1 GiB) cannot host a 2 GiB executor;
        # ask for what it has and let the operator raise it with conf.
        settings["spark.executor.memory"] = "768m"
    settings.update(conf or {})
    helper = jvm.helper_jar()
    if helper.jar is not None:  # shipped to the executors too, wherever they run
        settings["spark.jars"] = ",".join(j for j in (settings.get("spark.jars"), str(helper.jar)) if j)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if helper.jar is not None:
        register_char_counts(spark)
    return spark


def register_char_counts(spark: SparkSession) -> str | None:
    """Register the JVM counting helper (`jvm.FUNCTION`) in `spark`; None when it is there, else why not
    (the schema check then counts with Spark SQL expressions: the same verdicts, slower)."""
    from pyspark.sql.types import LongType

    helper = jvm.helper_jar()
    if helper.jar is None:
        return helper.reason
    try:
        spark.udf.registerJavaFunction(jvm.FUNCTION, jvm.CLASS_NAME, LongType())
    except Exception as exc:  # e.g. a session created elsewhere, without the jar on its class path
        return f"the session cannot load {jvm.CLASS_NAME} from {helper.jar}: {str(exc).splitlines()[0][:300]}"
    return None


def counting(spark: SparkSession) -> str:
    """How the schema check counts characters in this session, for reports."""
    if spark.catalog.functionExists(jvm.FUNCTION):
        return f"JVM helper {jvm.CLASS_NAME}"
    return f"Spark SQL expressions ({jvm.helper_jar().reason or 'helper not registered in this session'})"
