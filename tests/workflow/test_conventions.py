"""The Snakemake workflow catalog's conventions: `snakemake --lint` and `snakefmt --check` clean, the
rules' conda environment in step with the pins, every link of the report's captions resolving, and common.smk
holding only what several rule files share."""

import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest
import yaml

from tests import ROOT
from tests.workflow.runs import snakemake

GRIDS = sorted(p.stem for p in (ROOT / "ring" / "resources" / "grids").glob("*.yaml"))


@pytest.mark.parametrize("grid", GRIDS)
def test_snakemake_lint_is_clean_for_every_shipped_grid(workdir, grid):
    # The rules a grid plans depend on it (one per study, Table 4's), so each shipped grid is linted.
    result = snakemake(workdir, "--lint", "--config", f"grid={grid}", "data_root=/nonexistent", check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]
    assert "Lints for" not in output and "Congratulations, your workflow is in a good condition!" in output


def test_snakefmt_check_is_clean():
    snakefmt = Path(sys.executable).with_name("snakefmt")  # installed beside this interpreter (envs/install.sh)
    result = subprocess.run([str(snakefmt), "--check", "."], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    # It read the workflow's files, not nothing: the Snakefile and every rule file (functions.smk among them).
    assert f"All {1 + len(list((ROOT / 'workflow' / 'rules').rglob('*.smk')))} file(s) would be left unchanged" in (
        result.stderr
    ), result.stderr


def pins(lines) -> list[str]:
    return [line.split("#")[0].strip() for line in lines if line.split("#")[0].strip()]


def test_the_rules_conda_environment_pins_what_the_install_pins():
    env = yaml.safe_load((ROOT / "workflow" / "envs" / "ring.yaml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    assert pip == pins((ROOT / "envs" / "requirements-cpu.txt").read_text().splitlines())
    assert any(isinstance(d, str) and d.startswith("python=") for d in env["dependencies"])


def markdown_anchors(path: Path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings: lower case, punctuation dropped, spaces as '-'."""
    headings = re.findall(r"^#+ (.+)$", path.read_text(), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def caption_links() -> list[tuple[str, str]]:
    """(caption, target) of every RST hyperlink (`text <target>`_) in the report's captions."""
    return [
        (p.name, target)
        for p in sorted((ROOT / "workflow" / "report").glob("*.rst"))
        for target in re.findall(r"`[^`]*<([^<>\s`]+)>`__?", p.read_text())
    ]


def test_every_caption_link_resolves_from_where_the_report_is_written():
    """README's command (3) writes report.html at the repository root: a relative link there must name a
    file of the checkout and, with a #fragment, one of its headings."""
    links = caption_links()
    assert len(links) >= len(list((ROOT / "workflow" / "report").glob("*.rst")))  # the fidelity link in each
    for caption, target in links:
        if re.match(r"[a-z]+:", target):  # https:, mailto:, the report's own javascript:
            continue
        path, _, fragment = target.partition("#")
        assert (ROOT / path).is_file(), f"{caption}: {target} names no file from the repository root"
        if fragment:
            assert fragment in markdown_anchors(ROOT / path), f"{caption}: {path} has no heading #{fragment}"


RULES = ROOT / "workflow" / "rules"
COMMON = RULES / "common.smk"
FUNCTIONS = RULES / "functions.smk"
COMMON_MAX_LINES = 250  # the shared setup only; a function of one stage is in functions.smk


def code_names(path: Path) -> dict[str | None, set[str]]:
    """The identifiers a Snakemake file's code uses, by who uses them: each top-level ``def`` (its name) or the
    file's top-level code (None: statements, rules and handlers).  Comments and docstrings are left out; an
    f-string's ``{...}`` fields count.  The files are included into one namespace, so a name is its helper."""
    uses: dict[str | None, set[str]] = {None: set()}
    owner, depth, after_def = None, 0, False
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if tok.type == tokenize.INDENT:
            depth += 1
        elif tok.type == tokenize.DEDENT:
            depth -= 1
        elif tok.type in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT):
            continue
        elif depth == 0 and tok.start[1] == 0:  # a top-level statement starts: a def's block has ended
            owner = None
            after_def = tok.type == tokenize.NAME and tok.string == "def"
            continue
        if after_def and tok.type == tokenize.NAME:  # the name after a top-level `def`
            owner, after_def = tok.string, False
            uses.setdefault(owner, set())
        elif tok.type == tokenize.NAME:
            uses[owner].add(tok.string)
        elif tok.type == tokenize.STRING and re.match(r"[a-zA-Z]*[fF]", tok.string):
            fields = re.findall(r"(?<!\{)\{([^{}]+)\}", tok.string)
            uses[owner].update(n for field in fields for n in re.findall(r"[A-Za-z_]\w*", field))
    return uses


def reached(start: set[str], uses: dict[str | None, set[str]]) -> set[str]:
    """The helpers of ``uses`` (a file's defs) that ``start`` calls, directly or through one another."""
    found, todo = set(), [n for n in start if n in uses]
    while todo:
        name = todo.pop()
        if name not in found:
            found.add(name)
            todo += [n for n in uses[name] if n in uses and n not in found]
    return found - {None}


def stages() -> dict[str, dict[str | None, set[str]]]:
    """Each stage's code (its rule file's, and the functions of functions.smk it reaches), and the Snakefile's."""
    functions = code_names(FUNCTIONS)
    found = {}
    for path in [ROOT / "Snakefile", *sorted(RULES.glob("*.smk"))]:
        if path == FUNCTIONS:
            continue
        uses = code_names(path)
        for name in reached(set().union(*uses.values()), functions):
            uses.setdefault(name, set()).update(functions[name])
        found["Snakefile" if path.parent == ROOT else path.stem] = uses
    return found


def test_common_smk_stays_short():
    lines = len(COMMON.read_text().splitlines())
    assert lines <= COMMON_MAX_LINES, (
        f"common.smk has {lines} lines (at most {COMMON_MAX_LINES}): move a function one stage uses to functions.smk"
    )


def test_common_smk_holds_only_what_several_stages_share():
    """Each helper of common.smk is used by at least two stages (or the Snakefile and a stage), directly or through
    another shared helper, or by common.smk's own top-level code (grid loading, wildcard constraints, the run's
    handlers: every rule's): a helper of one stage lives in functions.smk."""
    files = stages()
    common = files.pop("common")
    helpers = set(common) - {None}
    assert {"stage_config", "own_shell", "table_outputs", "stale_evaluation"} <= helpers  # the parse found them
    shared = reached(common[None], common)
    users = {
        name: [f for f, uses in files.items() if name in reached(set().union(*uses.values()), common)]
        for name in helpers
    }
    one_stage = {name: who for name, who in users.items() if len(who) < 2 and name not in shared}
    assert not one_stage, f"helpers of common.smk used by at most one stage (move each to functions.smk): {one_stage}"


def test_rules_and_functions_live_apart_and_every_function_is_used():
    """`snakemake --lint` wants no rule file with functions: the rules' functions are in functions.smk (and the
    shared setup's in common.smk), which holds no rule; each is called by a rule file, the Snakefile or common.smk,
    directly or through another; none is defined twice (one namespace: the later would win)."""
    defined: dict[str, str] = {}
    for path in sorted([ROOT / "Snakefile", *RULES.rglob("*.smk")]):
        uses, where = code_names(path), path.relative_to(ROOT)
        for helper in set(uses) - {None}:
            assert helper not in defined, f"{helper} is defined in both {defined[helper]} and {where}"
            defined[helper] = where
        if path not in (COMMON, FUNCTIONS):
            assert set(uses) == {None}, f"{where} defines functions: they go to workflow/rules/functions.smk"
    assert not re.search(r"^(rule|checkpoint|use rule)\b", FUNCTIONS.read_text(), re.M), "functions.smk holds rules"
    assert {p.name for p in defined.values()} == {"common.smk", "functions.smk"}  # the parse found both
    functions = code_names(FUNCTIONS)
    used = set().union(*(set().union(*uses.values()) for uses in stages().values()), *code_names(COMMON).values())
    unused = set(functions) - {None} - reached(used, functions)
    assert not unused, f"functions.smk defines functions no rule file calls: {sorted(unused)}"


def test_no_rule_file_spells_a_cell_folder_by_hand():
    """Every cell pattern of the rules is built by ring.core.cell_paths.cell_file, the one spelling of the cell
    folders' layout the library reads too: none spells a seed folder (seed{seed}) itself."""
    for path in sorted([ROOT / "Snakefile", *RULES.rglob("*.smk")]):
        spelled = [
            line for line in path.read_text().splitlines() if "seed{" in line and not line.lstrip().startswith("#")
        ]
        assert not spelled, f"{path.relative_to(ROOT)} spells a cell folder (use cell_file): {spelled}"
    assert "cell_file(" in COMMON.read_text()  # the scan reads the files that build them
