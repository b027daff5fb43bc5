"""One SparkSession for every Spark test of this directory (starting Spark costs ~10 s)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from kraft_tck.traces.pipeline.session import build_session

    session = build_session("local[2]", app_name="kraft-tck-tests")
    yield session
    session.stop()
