"""The pipeline's JVM helper: `jvm/CharCounts.java`, a Spark UDF that counts the characters the per-line
schema check reads (`schema.checks`) in one pass over the line.

It is compiled from source with the JDK's `javac` against pyspark's own jars, once per source and Spark
version, into a cache directory (`$KRAFT_TCK_CACHE`, else `$XDG_CACHE_HOME/kraft-tck`, else
`~/.cache/kraft-tck`), and shipped to executors with `spark.jars`. Without a JDK (a JRE has no `javac`) or
when compiling fails, the check counts with Spark SQL expressions instead: the same verdicts, slower.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

SOURCE = Path(__file__).with_name("jvm") / "CharCounts.java"
CLASS_NAME = "kraft.tck.CharCounts"
#: The SQL name the session registers the helper under (`session.build_session`).
FUNCTION = "kraft_tck_char_counts"


@dataclass(frozen=True)
class Helper:
    jar: Path | None
    reason: str | None = None  # why there is no jar


def cache_dir() -> Path:
    if os.environ.get("KRAFT_TCK_CACHE"):
        return Path(os.environ["KRAFT_TCK_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kraft-tck"


def _spark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


@cache
def helper_jar(javac: str | None = None) -> Helper:
    """The helper's jar, compiled now if the cache has none for this source and Spark version (a cached
    jar needs no JDK)."""
    import pyspark

    digest = hashlib.sha256(SOURCE.read_bytes() + pyspark.__version__.encode()).hexdigest()[:16]
    jar = cache_dir() / f"jvm-{digest}" / "kraft-tck-jvm.jar"
    if jar.is_file():
        return Helper(jar)
    javac = javac or os.environ.get("KRAFT_TCK_JAVAC") or shutil.which("javac")
    if not javac:
        return Helper(None, "javac not found (install a JDK 17+, or point KRAFT_TCK_JAVAC at javac)")
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=jar.parent) as tmp:
        classes = Path(tmp) / "classes"
        cmd = [javac, "--release", "17", "-nowarn", "-cp", str(_spark_jars() / "*"), "-d", str(classes), str(SOURCE)]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return Helper(None, f"{javac} failed: {exc}")
        if done.returncode != 0:
            return Helper(None, f"{javac} failed ({done.returncode}): {(done.stderr or done.stdout).strip()[:500]}")
        part = Path(tmp) / "kraft-tck-jvm.jar"
        with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\n\r\n")
            for f in sorted(classes.rglob("*.class")):
                z.write(f, f.relative_to(classes).as_posix())
        os.replace(part, jar)  # atomic: a concurrent compile of the same source writes the same jar
    return Helper(jar)
