"""The workflow's code says each thing once (issue 42, item 4): no block of six or more lines stands twice in the
Snakefile and the rule files, within a file or across them.  A stage's config and hash rules, the tables' rules and
the study figures' are each one rule made per entry of a registry; what differs between copies goes in the entry."""

from collections import defaultdict
from pathlib import Path

from tests import ROOT

BLOCK = 6  # lines: the size of a block a duplicate-code scan reports


def workflow_code() -> list[Path]:
    """The Snakefile and every Snakemake or Python file under workflow/ (the report's captions are prose)."""
    return [ROOT / "Snakefile", *sorted(p for p in (ROOT / "workflow").rglob("*") if p.suffix in (".smk", ".py"))]


def code_lines(text: str) -> list[tuple[int, str]]:
    """(line number, the line stripped) of each line that is neither blank nor a comment."""
    lines = ((n, line.strip()) for n, line in enumerate(text.splitlines(), 1))
    return [(n, line) for n, line in lines if line and not line.startswith("#")]


def repeated_blocks(files: dict[str, str], size: int = BLOCK) -> list[str]:
    """``size`` consecutive code lines that stand at two places or more that do not overlap, each reported once with
    its places (``file:first-last``)."""
    places = defaultdict(list)
    for name, text in files.items():
        lines = code_lines(text)
        for i in range(len(lines) - size + 1):
            places[tuple(line for _, line in lines[i : i + size])].append(
                (name, i, lines[i][0], lines[i + size - 1][0])
            )
    found = []
    for where in places.values():
        apart = [where[0]]
        for place in where[1:]:  # a run of one repeated line is a block overlapping itself, not a copy
            if all(place[0] != p[0] or abs(place[1] - p[1]) >= size for p in apart):
                apart.append(place)
        if len(apart) > 1:
            found.append(" ~ ".join(f"{name}:{first}-{last}" for name, _, first, last in apart))
    return found


def test_no_block_of_six_lines_repeats_in_the_workflow():
    files = {str(p.relative_to(ROOT)): p.read_text() for p in workflow_code()}
    assert len(files) >= 10 and "workflow/rules/common.smk" in files  # it read the rule files
    repeated = repeated_blocks(files)
    assert not repeated, f"{len(repeated)} blocks of {BLOCK} lines stand twice (make one rule or helper of each): " + (
        "; ".join(repeated)
    )


def test_the_scan_finds_a_copied_block_and_ignores_what_is_not_one():
    rule = "rule a:\n    input:\n        'x',\n    output:\n        'y',\n    shell:\n        'cp {input} {output}'\n"
    copied = rule.replace("rule a:", "rule b:")
    # The same six lines after the rule's name, moved and reindented, with blank and comment lines between: found.
    moved = "\n".join(f"  {line}" + ("\n# note\n" if "output" in line else "") for line in copied.splitlines()[1:])
    assert repeated_blocks({"one.smk": rule, "two.smk": "x = 1\n\n" + moved}) == ["one.smk:2-7 ~ two.smk:3-10"]
    assert repeated_blocks({"one.smk": rule + "\n" + copied}) == ["one.smk:2-7 ~ one.smk:10-15"]
    # Five shared lines are not a block; one line repeated seven times overlaps itself only.
    assert repeated_blocks({"one.smk": rule, "two.smk": copied.replace("'x'", "'z'")}) == []
    assert repeated_blocks({"one.smk": "x = 1\n" * 7}) == []
