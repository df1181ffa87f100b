"""The documentation: README.md and docs/ link only to what exists, stay inside the repository,
and name only commands the CLI has.

Fast and offline: reads the Markdown files and builds the CLI's argument parser.
"""

from __future__ import annotations

import argparse
import re
import unicodedata
from pathlib import Path

import pytest

from .conftest import PROJECT

README = PROJECT / "README.md"
DOCS = sorted((PROJECT / "docs").rglob("*.md"))
PAGES = [README, *DOCS]
README_MAX_LINES = 250

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
# [text](target) or ![alt](target); the target ends at the first space or ")"
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
# `ragrig <verb>` where a command starts: the start of a code span, or in a code block the
# start of a line or of a command after && || ; | ( or a comment's "# =" (a prompt "$ " allowed)
VERB_IN_SPAN = re.compile(r"^\s*(?:\$\s+)?ragrig[ \t]+([a-z][a-z0-9-]*)")
VERB_IN_BLOCK = re.compile(r"(?:^|&&|\|\||[;|(]|#\s*=?)\s*(?:\$\s+)?ragrig[ \t]+([a-z][a-z0-9-]*)")
MODULE_FORMS = re.compile(r"python3?(?:\.\d+)? -m ragrig\.(?:cli|sweep|guards)\b")


def rel(path: Path) -> str:
    return str(path.relative_to(PROJECT))


def split_lines(path: Path) -> list[tuple[int, str, bool]]:
    """(line number, text, inside a fenced code block) for every line; fence lines are code."""
    out, fenced = [], False
    for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if FENCE.match(line):
            out.append((no, line, True))
            fenced = not fenced
            continue
        out.append((no, line, fenced))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: its text as rendered (code marks, emphasis and link
    targets gone), lower case, punctuation removed, each space a hyphen."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.lower()
    text = "".join(
        ch
        for ch in text
        if ch in " -_" or unicodedata.category(ch)[0] in "LNM" or unicodedata.category(ch) == "Pc"
    )
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor in `path`, repeats numbered -1, -2 ... as GitHub does."""
    seen: dict[str, int] = {}
    out = set()
    for _no, line, code in split_lines(path):
        m = None if code else HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(path: Path) -> list[tuple[int, str]]:
    """(line, target) of every Markdown link outside code."""
    out = []
    for no, line, code in split_lines(path):
        if code:
            continue
        for m in LINK.finditer(INLINE_CODE.sub("", line)):
            out.append((no, m.group(1)))
    return out


def test_the_pages_exist():
    names = {p.name for p in DOCS}
    assert README.exists()
    assert {"index.md", "metrics.md", "benchmarks.md"} <= names, sorted(names)


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_relative_links_resolve_and_anchors_match_a_heading(page):
    problems = []
    for no, target in links(page):
        if SCHEME.match(target):
            continue  # http(s), mailto: checked by nobody here
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        where = f"{rel(page)}:{no}: link {target!r}"
        if not dest.exists():
            problems.append(f"{where}: no such file {file_part!r}")
            continue
        if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            problems.append(f"{where}: no heading of {rel(dest)} has the anchor #{anchor}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_no_link_leaves_the_repository(page):
    root = PROJECT.resolve()
    problems = []
    for no, target in links(page):
        if SCHEME.match(target) or target.startswith("#"):
            continue
        dest = (page.parent / target.partition("#")[0]).resolve()
        if dest != root and root not in dest.parents:
            problems.append(f"{rel(page)}:{no}: link {target!r} points outside the repository")
    assert not problems, "\n".join(problems)


def test_readme_is_short_and_opens_with_the_two_commands():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md: {len(lines)} lines, at most {README_MAX_LINES} (the rest belongs in docs/)"
    )
    first, block = None, []
    for no, line, code in split_lines(README):
        if code and FENCE.match(line):
            if first is None:
                first = no
                continue
            break
        if first is not None:
            block.append(line)
    assert first is not None, "README.md: no fenced code block"
    text = "\n".join(block)
    for command in ("make repro", "make test"):
        assert command in text, f"README.md:{first}: the first code block lacks {command!r}"


def cli_verbs() -> set[str]:
    from ragrig.cli import build_parser

    parser = build_parser()
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert actions, "ragrig.cli.build_parser has no subcommands"
    return {verb for a in actions for verb in a.choices}


def commands_written(path: Path) -> list[tuple[int, str]]:
    """(line, verb) of every `ragrig <verb>` written as a command in `path`."""
    out = []
    for no, line, code in split_lines(path):
        if code:
            out += [(no, m.group(1)) for m in VERB_IN_BLOCK.finditer(line)]
        else:
            for span in INLINE_CODE.finditer(line):
                m = VERB_IN_SPAN.match(span.group(2))
                if m:
                    out.append((no, m.group(1)))
    return out


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_every_ragrig_command_names_a_verb_of_the_cli(page):
    verbs = cli_verbs()
    problems = [
        f"{rel(page)}:{no}: `ragrig {verb}` is not a verb of ragrig.cli "
        f"(verbs: {', '.join(sorted(verbs))})"
        for no, verb in commands_written(page)
        if verb not in verbs
    ]
    for no, line, _code in split_lines(page):
        for m in MODULE_FORMS.finditer(line):
            problems.append(f"{rel(page)}:{no}: {m.group(0)!r}: write the `ragrig <verb>` form")
    assert not problems, "\n".join(problems)


def test_the_checks_catch_what_they_are_for(tmp_path):
    """The helpers above on a page written to fail each check."""
    page = tmp_path / "page.md"
    page.write_text(
        "# A `code` title: (v2) & more\n\n## Same\n\n## Same\n\n"
        "[ok](#a-code-title-v2--more) [ok](#same-1) [bad](#nope) [x](missing.md)\n\n"
        "`ragrig gate` and `ragrig frobnicate --x`; prose ragrig keeps; `dvc remote add ragrig u`\n"
        "```bash\nmake x && ragrig calibrate  # = ragrig nothing\n```\n"
    )
    assert anchors(page) == {"a-code-title-v2--more", "same", "same-1"}
    assert [t for _no, t in links(page)] == [
        "#a-code-title-v2--more",
        "#same-1",
        "#nope",
        "missing.md",
    ]
    assert commands_written(page) == [
        (9, "gate"),
        (9, "frobnicate"),
        (11, "calibrate"),
        (11, "nothing"),
    ]
