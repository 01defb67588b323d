"""Commands read out of the documentation (README.md, docs/*.md), so that tests run them as written.

A test that runs documented commands reads them here rather than copying them: an edited command is
then tested as edited.  Reading a section also checks that it names the test reading it
(``tests/<file>.py::<test>``), so the page tells its reader which test runs those commands, and a
section moved to another page takes that line along or the test fails.
"""

from __future__ import annotations

import os
import re

from tests import ROOT

_HEADING = re.compile(r"(#{1,6}) (.+)")
_BASH = re.compile(r"```bash\n(.*?)```", re.S)


def current_test() -> str:
    """The running test as the documentation names it: ``tests/<file>.py::<test>``, parameters left out."""
    node = os.environ["PYTEST_CURRENT_TEST"].rsplit(" ", 1)[0]  # "<nodeid> (call)"
    return node.split("[", 1)[0]


def section(page: str, heading: str) -> str:
    """The text under ``heading`` of ``page`` (a path from the repository root), up to the next heading of
    its level or above. Lines inside fenced code are not headings: a shell comment starts with ``#`` too."""
    lines = (ROOT / page).read_text().splitlines()
    body, level, fenced = None, 0, False
    for line in lines:
        if line.lstrip().startswith("```"):
            fenced = not fenced
        match = None if fenced else _HEADING.fullmatch(line)
        if body is None:
            if match and match.group(2).strip() == heading:
                body, level = [], len(match.group(1))
            continue
        if match and len(match.group(1)) <= level:
            break
        body.append(line)
    if body is None:
        raise AssertionError(f"{page} has no heading {heading!r}")
    text = "\n".join(body)
    test = current_test()
    assert test in text, f"{page}, section {heading!r}, runs its commands in {test} but does not name that test"
    return text


def shell_commands(text: str) -> list[str]:
    """The commands of the ``bash`` code blocks in ``text``: continuation lines joined, comments left out."""
    lines = "\n".join(_BASH.findall(text)).replace("\\\n", " ").splitlines()
    return [line.split("  #")[0].strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def documented_commands(page: str, heading: str) -> list[str]:
    """The shell commands of one section of a documentation page, as written."""
    return shell_commands(section(page, heading))
