"""The report as a person sees it: rendered by a real headless Chromium (driven by Playwright, using the
system's browser), screenshot taken, and the rendered page checked — the failures summary is there, its
links open and scroll to their case, every diagram draws its arrowheads, and nothing is wider than the
window (the long TLC failure wraps inside its box)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from .report_fixture import FAILED, results, write

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


def _chromium() -> str:
    found = os.environ.get("KRAFT_TCK_CHROMIUM") or next(
        (p for name in ("chromium", "chromium-browser", "google-chrome") if (p := shutil.which(name))), None)
    if not found:
        pytest.skip("no Chromium to render the report: install it (Debian: apt-get install chromium) or set "
                    "KRAFT_TCK_CHROMIUM to a Chromium/Chrome binary")
    return found


def test_the_report_renders_in_a_browser(tmp_path: Path) -> None:
    executable = _chromium()
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (make setup does)")
    index = write(tmp_path / "report")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(index.as_uri())
            page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
            assert (tmp_path / "report.png").stat().st_size > 10_000

            summary = page.locator("#failures")
            assert summary.is_visible() and "Failures first (2)" in summary.inner_text()
            assert page.locator("details.case").count() == len(results())

            # A jump link opens nothing new but lands on its case, which is open and in view.
            anchor = FAILED.replace("/", "_")
            page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
            summary.locator(f'a[href="#{anchor}"]').click()
            case = page.locator(f"#{anchor}")
            assert case.get_attribute("open") is not None
            top = case.evaluate("e => e.getBoundingClientRect().top")
            assert 0 <= top < 900, top

            # Arrowheads: every arrow (a line or path that ends in a marker) names a marker that exists and
            # is drawn; the failed case's diagram has its arrows, its legend, its time column and its mark.
            arrows = page.locator(f"#{anchor} .svg [marker-end]").count()
            assert arrows > 0
            missing = page.evaluate("""() => [...document.querySelectorAll('[marker-end]')]
                .map(l => l.getAttribute('marker-end').slice(5, -1))
                .filter(id => !document.getElementById(id) || !document.getElementById(id).querySelector('path'))""")
            assert missing == []
            assert page.locator(f"#{anchor} .legend [marker-end]").count() == 3  # request, response, target's
            assert page.locator(f"#{anchor} .svg text", has_text="time").first.is_visible()
            assert page.locator(f"#{anchor} rect.mark").count() == 1
            assert page.locator(f"#{anchor} .svg text", has_text="the check failed after this").count() == 1

            # Nothing overflows the window; the long TLC failure wraps inside its box.
            overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 0, f"the page is {overflow}px wider than the window"
            box = page.locator("#tlc-node + div .box")
            widths = box.evaluate("e => [e.scrollWidth, e.clientWidth]")
            assert widths[0] <= widths[1], f"the TLC failure box overflows: {widths}"
        finally:
            browser.close()
