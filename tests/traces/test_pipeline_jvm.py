"""The pipeline's JVM helper (traces/pipeline/jvm.py): compiled from source with javac, cached, and
reported missing with the reason when it cannot be built (the schema check then counts in Spark SQL)."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest
from kraft_tck.traces.pipeline import jvm

needs_javac = pytest.mark.skipif(shutil.which("javac") is None,
                                 reason="javac not found: install a JDK 17+ (a JRE has none) to build the helper")


def test_no_javac_names_what_failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KRAFT_TCK_CACHE", str(tmp_path))  # an empty cache: the jar must be built
    helper = jvm.helper_jar("/nonexistent/javac")
    assert helper.jar is None
    assert helper.reason is not None and "/nonexistent/javac failed" in helper.reason


@needs_javac
def test_the_helper_is_compiled_once_into_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KRAFT_TCK_CACHE", str(tmp_path))
    jvm.helper_jar.cache_clear()
    try:
        first = jvm.helper_jar()
        assert first.reason is None and first.jar is not None and first.jar.parent.parent == tmp_path
        with zipfile.ZipFile(first.jar) as z:
            assert "kraft/tck/CharCounts.class" in z.namelist()
        stamp = first.jar.stat().st_mtime_ns
        jvm.helper_jar.cache_clear()
        again = jvm.helper_jar()
        assert again.jar == first.jar and again.jar.stat().st_mtime_ns == stamp  # reused, not rebuilt
        assert [p.name for p in tmp_path.iterdir()] == [first.jar.parent.name]  # no temporary left behind
    finally:
        jvm.helper_jar.cache_clear()
