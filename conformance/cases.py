"""``@case("KIP-595/Vote/3")``: turns a scenario coroutine into a pytest test bound to its catalog entry."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from kraft_tck.conformance.catalog import catalog, register
from kraft_tck.conformance.scenario import CaseSkipped, Scenario

ScenarioFn = Callable[[Scenario], Awaitable[None]]


def case(case_id: str) -> Callable[[ScenarioFn], Callable[..., None]]:
    def deco(fn: ScenarioFn) -> Callable[..., None]:
        register(case_id, fn)

        def test(kraft_session: Any, record_property: Callable[[str, object], None]) -> None:
            spec = catalog().get(case_id)
            record_property("case_id", case_id)
            if spec is not None:
                record_property("clause", str(spec.clause))
            try:
                kraft_session.run_case(case_id, fn)
            except CaseSkipped as exc:
                pytest.skip(f"{case_id}: {exc}")

        test.__name__ = fn.__name__
        test.__qualname__ = fn.__name__
        test.__doc__ = f"{case_id}: {fn.__doc__ or ''}".strip()
        test.case_id = case_id  # type: ignore[attr-defined]
        test.__module__ = fn.__module__
        return test

    return deco
