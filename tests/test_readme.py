"""README.md renders as intended on any CommonMark site (GitHub, PyPI, crates.io).

An unclosed code fence swallows the rest of the file into one code block,
which the doctests do not notice (they read ``>>>`` lines wherever they are).
These tests parse the README with markdown-it-py (CommonMark) and compare it
with a plain line scan in which each ```` ``` ```` line opens or closes a
fence: every fence is closed where the scan closes it, every ``#`` line
outside a fence is a heading, and relative links point at files that exist.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

README = Path(__file__).resolve().parent.parent / "README.md"


@pytest.fixture(scope="module")
def source() -> list[str]:
    return README.read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="module")
def tokens(source: list[str]) -> list:
    return MarkdownIt("commonmark").parse("\n".join(source))


def scan(source: list[str]) -> tuple[list[tuple[int, int]], list[int]]:
    """Fences ``(opening line, closing line)`` and heading lines (0-based)."""
    fences, headings, start = [], [], None
    for i, line in enumerate(source):
        if line.startswith("```"):
            if start is None:
                start = i
            else:
                fences.append((start, i))
                start = None
        elif start is None and re.match(r"#{1,6} ", line):
            headings.append(i)
    assert start is None, f"the fence opened on line {start + 1} is never closed"
    return fences, headings


def test_every_fence_is_closed(source: list[str], tokens: list) -> None:
    fences, _ = scan(source)
    rendered = [(t.map[0], t.map[1] - 1) for t in tokens if t.type == "fence"]
    assert rendered == fences
    for _, end in rendered:
        assert source[end].strip() == "```", f"line {end + 1} should close a fence"


def test_every_section_heading_renders_as_a_heading(source: list[str], tokens: list) -> None:
    _, headings = scan(source)
    rendered = [t.map[0] for t in tokens if t.type == "heading_open"]
    assert rendered == headings
    titles = [source[i].lstrip("#").strip() for i in headings]
    for title in ("Python quick start", "Polynomial sketches", "Localized Maclaurin GP"):
        assert title in titles


def test_relative_links_exist(tokens: list) -> None:
    targets = []
    for t in tokens:
        for child in t.children or []:
            attr = child.attrs.get("href") or child.attrs.get("src")
            if attr and not re.match(r"[a-z]+:|#", attr):
                targets.append(attr)
    assert targets, "the README links to no file of the repository"
    missing = [t for t in targets if not (README.parent / t).exists()]
    assert not missing
