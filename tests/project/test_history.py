"""The repository's history as docs/development.md ("Merges and releases") asks for it: a merge commit says what its
branch brings, and every released version of CHANGELOG.md is a version the code had, which a local tag, where there
is one, marks.  Green on a fresh clone without tags (CI's): the releases are checked against the commits."""

import re
import subprocess
from datetime import date

import pytest

from tests import ROOT

# The rule on merge subjects holds from this commit on (main's head when it was written); the 18 merges before it
# that say only "Merge branch 'x'" stay as they are.
MERGES_DESCRIBED_SINCE = "9413210"
# "Merge branch 'NAME'" (into main, or "into X"), then a colon and what the branch brings, in three words or more.
MERGE_SUBJECT = re.compile(r"Merge (?:remote-tracking )?branch '[^']+'(?: into \S+)?: \S+(?: \S+){2,}")
RELEASE = re.compile(r"^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})$", re.M)
# Where the version lived: pyproject.toml's `version` until 0.2.0's `ring` command, ring/__init__.py's since.
VERSION_LINE = r'^(__version__|version) = "{}"'


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60).stdout


def releases() -> list[tuple[str, date]]:
    return [(v, date.fromisoformat(d)) for v, d in RELEASE.findall((ROOT / "CHANGELOG.md").read_text())]


@pytest.mark.parametrize(
    ("subject", "described"),
    [
        ("Merge branch 'footprint'", False),  # 76aee43, one of the merges before the rule
        ("Merge branch 'wheel'", False),
        ("Merge branch 'x': fix", False),
        ("Merge branch 'tidy': ring.cluster.slurm, one checksum reader, doc figures from data", True),
        ("Merge branch 'issue-42' into main: ring run, plug-ins however installed, true docs", True),
    ],
)
def test_a_merge_subject_says_what_the_branch_brings(subject, described):
    assert bool(MERGE_SUBJECT.fullmatch(subject)) is described


def test_every_merge_since_the_rule_says_what_its_branch_brings():
    subjects = git("log", "--merges", "--format=%h %s", f"{MERGES_DESCRIBED_SINCE}..HEAD").splitlines()
    bare = [line for line in subjects if not MERGE_SUBJECT.fullmatch(line.split(" ", 1)[1])]
    assert not bare, f"merge commits that do not say what their branch brings (docs/development.md): {bare}"


def test_every_released_version_is_one_the_code_had_and_its_tag_marks_it():
    released = releases()
    assert released and [v for v, _ in released] == sorted((v for v, _ in released), key=_key, reverse=True)
    for version, day in released:
        # The oldest commit that set the version: the release; it came on or before the date CHANGELOG gives.
        pattern = VERSION_LINE.format(re.escape(version))
        found = git("log", "--reverse", "--format=%H %cs", "-G", pattern, "--", "pyproject.toml", "ring/__init__.py")
        assert found, f"CHANGELOG.md releases {version}, a version no commit of this history had"
        commit, committed = found.splitlines()[0].split()
        assert date.fromisoformat(committed) <= day, f"{version} was set on {committed}, after its CHANGELOG date {day}"
    versions = {v for v, _ in released}
    for tag in git("tag", "--list", "v*").split():  # a fresh clone has none: nothing to check
        assert tag[1:] in versions, f"tag {tag} names no release of CHANGELOG.md"
        sources = git("show", f"{tag}:ring/__init__.py") + git("show", f"{tag}:pyproject.toml")
        assert re.search(VERSION_LINE.format(re.escape(tag[1:])), sources, re.M), f"tag {tag} marks another version"


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))
