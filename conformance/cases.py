"""``@case("KIP-595/Vote/3")``: turns a scenario coroutine into a pytest test bound to its catalog entry."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from kraft_tck.conformance.catalog import catalog, register
from kraft_tck.conformance.scenario import CaseSkipped, Scenario

ScenarioFn = Callable[[Scenario], Awaitable[None]]

#: The attribute ``@case(..., own_life=True)`` sets on the scenario coroutine and on the test function.
OWN_LIFE = "kraft_tck_own_life"


def case(case_id: str, *, own_life: bool = False) -> Callable[[ScenarioFn], Callable[..., None]]:
    """``own_life``: the case's first step relaunches the target on a wiped directory whenever the target can be
    relaunched (a life of its own: other properties, an observer, an unformatted directory): a life the case before
    left retired (``Scenario.retire_life``) needs no plain relaunch before it (``Session.run_case``), and the
    parallel scheduler runs such cases one after another on one target (``plugin.CaseScheduling``)."""

    def deco(fn: ScenarioFn) -> Callable[..., None]:
        register(case_id, fn)
        setattr(fn, OWN_LIFE, own_life)

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
        setattr(test, OWN_LIFE, own_life)
        test.__module__ = fn.__module__
        return test

    return deco
