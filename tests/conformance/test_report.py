"""The HTML report, read as a page: failures first with links, each case once, clauses linked and
paraphrased, verdict levels, a reproduce command, diagrams with arrowheads, a legend and the failing
frame marked. tests/conformance/test_report_browser.py renders the same page in Chromium."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import yaml
from kraft_tck.conformance.catalog import catalog
from kraft_tck.conformance.report import clause_link, repro_command

from .report_fixture import DIFFERS, ERRORED, FAILED, PASSED, SKIPPED, results, write

REPO = Path(__file__).resolve().parents[2]


class _Ids(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.links: list[str] = []
        self.cases: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.append(str(a["id"]))
        if tag == "a" and str(a.get("href", "")).startswith("#"):
            self.links.append(str(a["href"])[1:])
        if tag == "details" and "case" in str(a.get("class", "")).split():
            self.cases.append(str(a["id"]))


def test_failures_come_first_and_link_to_their_case(tmp_path: Path) -> None:
    page = write(tmp_path).read_text()
    parsed = _Ids()
    parsed.feed(page)
    summary = page[page.index('id="failures"'):page.index("</section>")]
    anchors = re.findall(r'href="#([^"]+)"', summary)
    assert anchors[:2] == [FAILED.replace("/", "_"), ERRORED.replace("/", "_")]
    assert "tlc-node" in anchors  # the failed node-trace validation is listed with the failures
    assert all(link in parsed.ids for link in parsed.links), "a jump link with no target"
    assert page.index('id="failures"') < page.index(f'id="{PASSED.replace("/", "_")}"')


def test_each_case_appears_once(tmp_path: Path) -> None:
    parsed = _Ids()
    parsed.feed(write(tmp_path).read_text())
    assert sorted(parsed.cases) == sorted(r.case.id.replace("/", "_") for r in results())
    assert len(parsed.ids) == len(set(parsed.ids)), "duplicate ids in the page"


def test_a_case_shows_its_clause_levels_and_how_to_reproduce(tmp_path: Path) -> None:
    page = write(tmp_path).read_text()
    case = page[page.index(f'id="{DIFFERS.replace("/", "_")}"'):]
    case = case[:case.index("</details>")]
    assert "https://cwiki.apache.org/confluence/display/KAFKA/KIP-595" in case and "Leader Progress Timeout" in case
    assert "the kit's paraphrase" in case
    assert "differs from Kafka" in case and "checkquorum.timeout-factor" in case
    assert ("pytest conformance --target 127.0.0.1:9093 --target-id 1 --no-tlc --case "
            f"&#39;{DIFFERS}&#39;") in case
    skipped = page[page.index(f'id="{SKIPPED.replace("/", "_")}"'):]
    assert "pass --target-cmd" in skipped[:skipped.index("</details>")]


def test_a_failed_case_marks_the_targets_last_frame_and_explains_a_passing_tlc(tmp_path: Path) -> None:
    page = write(tmp_path).read_text()
    case = page[page.index(f'id="{FAILED.replace("/", "_")}"'):]
    case = case[:case.index("</details>")]
    assert case.count('class="mark"') == 1 and "the check failed after this" in case
    assert "a case can fail a rule the model leaves out" in case
    marker = "m-KIP-595_Divergence_1-t"  # the target's arrowhead, unique to this diagram
    assert re.search(f'<marker [^>]*id="{marker}"', case) and f'marker-end="url(#{marker})"' in case
    assert "sent by the target" in page and "harness note" in page  # the legend
    passed = page[page.index(f'id="{PASSED.replace("/", "_")}"'):]
    assert 'class="mark"' not in passed[:passed.index("</details>")]


def test_repro_command_keeps_the_target_and_drops_the_selection() -> None:
    assert repro_command([]) == "pytest conformance"
    assert repro_command(["conformance", "--no-tlc", "conformance", "-k", "Vote", "--section=Vote",
                          "--target-cmd", "run {port}", "--report", "r", "-q"]) == (
        "pytest conformance --no-tlc --target-cmd 'run {port}'")


def test_every_clause_the_catalog_cites_is_in_kip_clauses() -> None:
    data = yaml.safe_load((REPO / "spec" / "kip-clauses.yaml").read_text())
    known = {(c["kip"], c["section"]) for c in data["sections"]}
    missing = sorted({(c.clause.kip, c.clause.section) for c in catalog().values()} - known)
    assert not missing, f"add these to spec/kip-clauses.yaml: {missing}"
    url, title, says = clause_link("KIP-595", "Fetch Request Handling")
    assert url.endswith("#KIP595:ARaftProtocolfortheMetadataQuorum-FetchRequestHandling") and title and says
