"""The README's and the docs' links point at files of this repository: every relative
Markdown link, and every page named in backquotes with a directory (``docs/live.md``),
exists (from the page's directory or from the repository's root). (Source files are
named in backquotes from the package, ``engine/step.py``: not checked here.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
QUOTED_PAGE = re.compile(r"`([\w.-]+(?:/[\w.-]+)+\.md)`")


def targets(page: Path) -> list[str]:
    text = page.read_text(encoding="utf-8")
    linked = [t.split("#", 1)[0] for t in LINK.findall(text) if not re.match(r"[a-z]+:|#", t)]
    return [t for t in linked if t] + QUOTED_PAGE.findall(text)


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_file_a_page_names_exists(page):
    missing = [t for t in targets(page) if not (page.parent / t).exists() and not (ROOT / t).exists()]
    assert missing == [], f"{page.relative_to(ROOT)} names files that are not in the repository: {missing}"
