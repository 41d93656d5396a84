"""Every pointer into the docs names a page and a section that exist.

Code, docs and notebooks point readers at a section by its title
(``docs/controller.md, "Moves that pay"``) or its number (``docs/has.md §8``). A
section renamed or moved leaves such a pointer dangling with nothing to say so;
this test reads every tracked text file and finds each pointer's page and
section: a heading that starts with the title (its number, if any, set aside),
or a bold lead-in (``**A decoder that lingers**``), or for ``§N`` a heading
numbered N.
"""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUFFIXES = (".py", ".md", ".ipynb", ".toml", ".txt")
#: ``docs/x.md, "Title"`` (also ``:`` or a space before the quote; in a notebook the quote is escaped)
BY_TITLE = re.compile(r'(docs/[\w./-]+\.md)(?:[,:]\s*|\s+)\\?"([^"\\]+)\\?"')
BY_NUMBER = re.compile(r"(docs/[\w./-]+\.md),?\s*§\s*(\d+[a-z]?(?:\.\d+)*)")
HEADING_NUMBER = re.compile(r"^(\d+[a-z]?(?:\.\d+)*)\.?\s+")
#: a page of ours named alone (``docs/x.md``; deeper ``docs/...`` paths are also other projects'
#: docs, which our pages cite) and a file of the committed results
BY_PAGE = re.compile(r"(?<![\w/])(docs/[\w.-]+\.md|docs/results/[\w./-]+\.(?:md|csv|png|json|txt))\b")


def _tracked() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=False)
    except OSError:
        pytest.skip("git is not available")
    if out.returncode != 0:
        pytest.skip("not a git checkout")
    return [ROOT / name for name in out.stdout.splitlines() if name.endswith(SUFFIXES)]


def _plain(text: str) -> str:
    """Lower case, without Markdown marks, comment leaders (a title wrapped in a ``#:`` comment)
    or repeated spaces."""
    text = re.sub(r"(^|\s)#+:?(?=\s)", " ", text)
    return re.sub(r"\s+", " ", re.sub(r"[`*_]", "", text)).strip().lower()


@cache
def _sections(page: str) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]] | None:
    """The page's heading titles (numbers set aside), bold lead-ins and heading numbers."""
    path = ROOT / page
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8")
    headings = [re.sub(r"^#+\s*", "", line).strip() for line in text.splitlines() if re.match(r"#+\s", line)]
    numbers = tuple(m.group(1) for h in headings if (m := HEADING_NUMBER.match(h)))
    titles = tuple(_plain(HEADING_NUMBER.sub("", h)) for h in headings)
    bold = tuple(_plain(b) for b in re.findall(r"\*\*([^*]+)\*\*", text))
    return titles, bold, numbers


def _dangling(name: str, text: str) -> list[str]:
    """The pointers in ``text`` (of the file ``name``) whose page or section does not exist."""
    found = []
    for match in BY_TITLE.finditer(text):
        page, title = match.group(1), _plain(match.group(2))
        sections = _sections(page)
        if sections is None:
            found.append(f"{name}: {page} does not exist")
        elif not any(t.startswith(title) for t in sections[0] + sections[1]):
            found.append(f"{name}: {page} has no section {match.group(2)!r}")
    for match in BY_NUMBER.finditer(text):
        page, number = match.group(1), match.group(2)
        sections = _sections(page)
        if sections is None:
            found.append(f"{name}: {page} does not exist")
        elif number not in sections[2]:
            found.append(f"{name}: {page} has no section §{number}")
    for match in BY_PAGE.finditer(text):
        if not (ROOT / match.group(1)).exists():
            found.append(f"{name}: {match.group(1)} does not exist")
    return list(dict.fromkeys(found))  # a missing page named with a section is said once


def test_every_pointer_into_the_docs_names_a_page_and_section_that_exist() -> None:
    dangling = []
    for file in _tracked():
        if file == Path(__file__).resolve():  # its own pointers are the probe's, made to dangle
            continue
        if file.name == "fidelity.md" and "results" in file.parts:  # a report names what its run read
            continue
        try:
            text = file.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):  # a file git tracks but the checkout lacks, or binary
            continue
        dangling += _dangling(str(file.relative_to(ROOT)), text)
    assert not dangling, "\n".join(dangling)


def test_the_check_finds_a_renamed_section_a_missing_page_and_a_missing_number() -> None:
    text = ('# see docs/controller.md, "Moves that cost", docs/nope.md, "X", docs/has.md §42\n'
            '# and docs/controller.md, "Moves that pay", docs/has.md §8, docs/workloads.md: "Trace files",\n'
            '# docs/calibration.md §3.4, docs/controller.md, "A decoder that lingers", and one wrapped:\n'
            '#: docs/controller.md, "Settled by\n#: the evidence"\n')
    assert _dangling("probe.py", text) == [
        "probe.py: docs/controller.md has no section 'Moves that cost'",
        "probe.py: docs/nope.md does not exist",
        "probe.py: docs/has.md has no section §42"]
    pages = "see docs/results/nope.csv and docs/results/report.md, and docs/gone.md"
    assert _dangling("probe.md", pages) == ["probe.md: docs/results/nope.csv does not exist",
                                            "probe.md: docs/gone.md does not exist"]
