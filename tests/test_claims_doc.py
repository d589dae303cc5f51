"""docs/claims.md, the claims table for readers, says what the code does: the claims of
reports/claims.py, and for each the scenario the suite runs and the anomaly kinds its
verdict expects and forbids."""

from __future__ import annotations

import re
from pathlib import Path

from driftlab.reports.claims import CLAIMS
from driftlab.scenarios.catalogue.registry import claims_scenarios

DOC = Path(__file__).resolve().parent.parent / "docs" / "claims.md"


def _rows(heading: str) -> list[list[str]]:
    """The cells of the first table after `heading` (the whole document for "")."""
    text = DOC.read_text()
    text = text[text.index(heading) :] if heading else text
    rows, started = [], False
    for line in text.splitlines():
        if line.startswith("|"):
            started = True
            cells = [c.strip() for c in line.strip("|").split("|")]
            if not set("".join(cells)) <= {"-", " "}:
                rows.append(cells)
        elif started:
            break
    return rows[1:]  # without the header


def _kinds(cell: str) -> set[str]:
    return set(re.findall(r"`([^`]+)`", cell))


def test_the_claims_table_has_the_claims_of_the_suite_page() -> None:
    assert [row[0] for row in _rows("")] == list(CLAIMS)


def test_each_claim_is_tested_by_the_scenario_and_verdict_the_doc_names() -> None:
    documented = {
        row[0]: (row[1].strip("`"), _kinds(row[2]), _kinds(row[3]))
        for row in _rows("## How each claim is tested")
    }
    actual = {
        sc.claim: (
            sc.name,
            {k for k, v in sc.expectations.items() if v == "present"},
            {k for k, v in sc.expectations.items() if v == "absent"},
        )
        for sc in claims_scenarios()
    }
    assert documented == actual
    assert {claim.split("-")[0] for claim in documented} == set(CLAIMS)
