"""The documentation: README.md as a front page, the MkDocs site in docs/, and the tests they name."""

import ast
import importlib
import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests import ROOT
from tests.workflow.runs import job_counts, snakemake

PAGES = sorted(p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md"))
# A test as the documentation names it: tests/<file>.py::<function>.
NAMED_TEST = re.compile(r"(tests/[\w/]+\.py)::(\w+)")


def nav_pages(nav) -> list[str]:
    """The pages of mkdocs.yml's nav, sections flattened."""
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [page for item in nav for page in nav_pages(item)]
    return [page for value in nav.values() for page in nav_pages(value)]


def test_the_site_builds_in_strict_mode(tmp_path):
    # mkdocs.yml raises broken links, missing anchors and pages left out of the nav to warnings,
    # which --strict turns into a failed build.
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for page in PAGES:
        built = "index.html" if page == "index.md" else page.removesuffix(".md") + "/index.html"
        assert (tmp_path / "site" / built).is_file(), page


def test_every_page_is_in_the_nav_once():
    nav = nav_pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])
    assert sorted(nav) == PAGES, f"nav lacks {sorted(set(PAGES) - set(nav))}, lists {sorted(set(nav) - set(PAGES))}"
    assert len(nav) == len(set(nav)), "a page is listed twice in the nav"


def test_the_readme_is_a_front_page_that_links_every_page():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 300, "README.md is the front page: at most 300 lines; move a section to docs/"
    links = re.findall(r"\]\(docs/([\w./-]+?\.md)(?:#([\w-]*))?\)", readme)
    linked = {page for page, _ in links}
    assert linked >= set(PAGES), f"README's 'Where to read more' lacks {sorted(set(PAGES) - linked)}"
    # GitHub shows the README, not the site, so MkDocs never checks its links into docs/: they are checked here.
    assert linked <= set(PAGES), f"README links missing pages {sorted(linked - set(PAGES))}"
    for page, anchor in links:
        assert not anchor or anchor in anchors(ROOT / "docs" / page), (
            f"README links {page}#{anchor}, which has no such heading"
        )


def anchors(page: Path) -> set[str]:
    """The ids MkDocs gives the headings of a page (Markdown's toc slugs), fenced code left out."""
    from markdown.extensions.toc import slugify

    ids, fenced = set(), False
    for line in page.read_text().splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.fullmatch(r"#{1,6} (.+)", line)):
            ids.add(slugify(match.group(1), "-"))
    return ids


def test_every_test_the_documentation_names_exists():
    named: dict[tuple[str, str], list[str]] = {}
    for doc in ["README.md", *(f"docs/{page}" for page in PAGES)]:
        for path, name in NAMED_TEST.findall((ROOT / doc).read_text()):
            named.setdefault((path, name), []).append(doc)
    assert len(named) > 20  # the README and the pages name the tests beside their commands
    missing = []
    for (path, name), docs in sorted(named.items()):
        file = ROOT / path
        functions = (
            {node.name for node in ast.walk(ast.parse(file.read_text())) if isinstance(node, ast.FunctionDef)}
            if file.is_file()
            else set()
        )
        if name not in functions or not name.startswith("test_"):
            missing.append(f"{path}::{name} (named in {', '.join(sorted(set(docs)))})")
    assert not missing, "the documentation names tests that do not exist:\n" + "\n".join(missing)


# A fenced YAML block, or an inline code span that is one `key: value` (the docs' way of naming a setting).
YAML_BLOCK = re.compile(r"^```ya?ml\n(.*?)^```", re.S | re.M)
INLINE_SETTING = re.compile(r"`([a-z_]+: [^`\n]+)`")


def word_keys() -> set[str]:
    """The stage config keys whose values are words (str fields), where a YAML boolean is always a mistake."""
    import dataclasses

    from ring.core import config

    classes = [
        config.PretrainConfig,
        config.LinclsConfig,
        config.TransferConfig,
        config.DetectionConfig,
        config.ToyCNCEConfig,
    ]
    return {f.name for cls in classes for f in dataclasses.fields(cls) if str(f.type).startswith("str")}


def booleans_at_word_keys(values, keys: set[str]):
    """``key=value`` of every YAML boolean at a key of ``keys``, at any depth of ``values``."""
    if isinstance(values, dict):
        for key, value in values.items():
            if key in keys and isinstance(value, bool):
                yield f"{key}={value}"
            yield from booleans_at_word_keys(value, keys)
    elif isinstance(values, list):
        for value in values:
            yield from booleans_at_word_keys(value, keys)


def test_every_setting_the_docs_write_loads_as_the_word_it_shows():
    """`compile: on` unquoted loads as compile=True, which the checks refuse: every example names a word quoted."""
    from ring.core.yaml_reading import Loader

    keys = word_keys()
    assert {"compile", "channels_last", "precision", "augment"} <= keys
    examples = 0
    wrong = []
    for doc in ["README.md", *(f"docs/{page}" for page in PAGES)]:
        text = (ROOT / doc).read_text()
        for snippet in [*YAML_BLOCK.findall(text), *INLINE_SETTING.findall(text)]:
            try:
                values = yaml.load(snippet, Loader=Loader)
            except yaml.YAMLError:  # prose in backticks that merely looks like a setting
                continue
            examples += isinstance(values, dict)
            wrong += [f"{doc}: `{snippet.strip()}` loads as {found}" for found in booleans_at_word_keys(values, keys)]
    assert examples > 10  # the scan reads the docs' settings (a broken pattern would pass every doc)
    assert not wrong, "quote these words (YAML reads unquoted on/off/yes/no as booleans):\n" + "\n".join(wrong)


def test_every_study_and_table_a_grid_can_ask_for_has_a_target_and_a_readme_row():
    """A grid's `studies:` and `tables:` blocks name what all_tables builds: each has a rule of its own in the
    Snakefile and a row in README's "What `all_tables` builds"."""
    schema = yaml.safe_load((ROOT / "ring/resources/schemas/grid.schema.yaml").read_text())["properties"]
    targets = [f"fig_{study}" for study in schema["studies"]["propertyNames"]["enum"]]
    targets += schema["tables"]["propertyNames"]["enum"]
    rules = set(re.findall(r"^rule (\w+):", (ROOT / "Snakefile").read_text(), flags=re.M))
    readme = (ROOT / "README.md").read_text()
    builds = readme[readme.index("### What `all_tables` builds") :]
    builds = builds[: builds.index("\n## ")]
    assert [t for t in targets if t not in rules] == []
    assert [t for t in targets if f"`{t}`" not in builds] == []


# Issue 33 item 9: a job count, test count, duration or memory figure in the docs comes from data.  What the
# scan below counts as such a figure (the issue's own grep); each must lie inside a quote of FIGURES.
FIGURE = re.compile(r"[0-9]+ (jobs|tests|minutes|min|s\b|seconds|MB|GB)")
FIGURES = ROOT / "ring" / "resources" / "figures" / "doc-figures.json"
NUMBER = re.compile(r"(?<![\w.])\d+(?:,\d{3})*(?:\.\d+)?")
# docs/results.md's disk table: file sizes (measured with du on the smoke grid, computed from parameter counts
# for ImageNet), not durations or counts; its own sentences say how each was obtained.
NOT_FIGURES = {"docs/results.md": "## Disk"}
GENERATED = re.compile(r"<!-- ([\w-]+):begin \(.*?<!-- \1:end -->", re.S)


def figure_docs() -> list[str]:
    return ["README.md", *(f"docs/{page}" for page in PAGES), "pyproject.toml"]


def figures() -> list[dict]:
    return json.loads(FIGURES.read_text())["figures"]


def decimals(number: str) -> int:
    return len(number.partition(".")[2])


def value_at(doc: dict | list, key: str) -> float:
    """A number of a committed JSON or YAML file: a dotted path (a list's index a number), ``#`` at its end for a
    list's length."""
    *path, last = key.removesuffix("#").split(".")
    for part in [*path, last]:
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return len(doc) if key.endswith("#") else doc


def setting(name: str) -> float:
    """A default of the code, ``module:Class.field`` or ``module:function.parameter``."""
    module, _, path = name.partition(":")
    owner, attribute = path.split(".")
    thing = getattr(importlib.import_module(module), owner)
    if inspect.isfunction(thing):
        return inspect.signature(thing).parameters[attribute].default
    return getattr(thing, attribute)


def computed(entry: dict) -> list[float]:
    """What a ``computed`` entry's function, ``module:function``, returns for its ``args``: one number or a list."""
    module, _, name = entry["computed"].partition(":")
    value = getattr(importlib.import_module(module), name)(*entry.get("args", []))
    return list(value) if isinstance(value, (list, tuple)) else [value]


def source_numbers(entry: dict) -> list[float] | None:
    """The numbers an entry's source gives for its quote, in the quote's order; None for a test or a target, whose
    source is a test's assertion or a goal."""
    if entry["kind"] == "data":
        text = (ROOT / entry["file"]).read_text()
        data = yaml.safe_load(text) if entry["file"].endswith(".yaml") else json.loads(text)
        scales = entry.get("scales", [1] * len(entry["keys"]))
        return [value_at(data, key) * scale for key, scale in zip(entry["keys"], scales, strict=True)]
    if entry["kind"] == "setting":
        return [setting(name) for name in entry["settings"]]
    if entry["kind"] == "computed":
        return computed(entry)
    if entry["kind"] == "test":
        path, _, name = entry["test"].partition("::")
        assert f"def {name}(" in (ROOT / path).read_text(), f"{entry['test']} does not exist"
        return None
    assert entry["kind"] == "target" and entry["source"], f"not a kind of source: {entry}"
    return None


def mismatch(entry: dict) -> str | None:
    """How an entry's quote differs from its source, each source number rounded as the quote rounds it; None when
    they agree."""
    expected = source_numbers(entry)
    if expected is None:
        return None
    quoted = NUMBER.findall(entry["quote"])
    if len(quoted) != len(expected):
        return f"{entry['doc']}: {entry['quote']!r} has {len(quoted)} numbers, its source {len(expected)}"
    for number, value in zip(quoted, expected, strict=True):
        if float(number.replace(",", "")) != round(value, decimals(number)):
            return f"{entry['doc']}: {number} in {entry['quote']!r}, but its source gives {value}"
    return None


def test_every_figure_in_the_docs_comes_from_data():
    """Each figure the scan finds lies inside a quote of ring/resources/figures/doc-figures.json, and each quote is
    in its page as written, with the numbers its source gives: a committed record read key by key (rounded as the
    text rounds), a default of the code, a function of the code, or a test that measures it; a goal is a target.
    A one-off measurement goes into a record (ring/resources/figures/dev-measurements.json) first."""
    entries, uncovered = figures(), []
    for doc in figure_docs():
        text = (ROOT / doc).read_text()
        spans = [
            (m.start(), m.start() + len(e["quote"]))
            for e in entries
            if e["doc"] == doc
            for m in re.finditer(re.escape(e["quote"]), text)
        ]
        # A block between generator markers is the generator's output, which its own test compares with the code's
        # (benchmarks.price --docs: test_benchmarks.py; benchmarks.docs_figures: test_doc_claims.py).
        spans += [(m.start(), m.end()) for m in GENERATED.finditer(text)]
        if doc in NOT_FIGURES:
            start = text.index(NOT_FIGURES[doc])
            end = text.find("\n## ", start + 1)
            spans.append((start, len(text) if end < 0 else end))
        for match in FIGURE.finditer(text):
            if not any(a <= match.start() and match.end() <= b for a, b in spans):
                line = text.count("\n", 0, match.start()) + 1
                uncovered.append(f"{doc}:{line}: {match.group(0)!r}")
    assert uncovered == [], f"figures with no source in {FIGURES.name}: {uncovered}"
    for e in entries:
        assert e["quote"] in (ROOT / e["doc"]).read_text(), f"{e['doc']} no longer says {e['quote']!r}"
    assert [m for m in map(mismatch, entries) if m] == []


def test_a_figure_that_differs_from_its_source_fails():
    """A quote whose number is off by one in its last digit, for each kind that gives numbers, is reported; so is a
    hand-typed value with no source."""
    for kind in ("data", "setting", "computed"):
        entry = next(e for e in figures() if e["kind"] == kind)
        assert mismatch(entry) is None
        last = NUMBER.findall(entry["quote"])[-1]
        changed = last[:-1] + str((int(last[-1]) + 1) % 10)
        cut = entry["quote"].rindex(last)
        wrong = dict(entry, quote=entry["quote"][:cut] + changed + entry["quote"][cut + len(last) :])
        assert mismatch(wrong) is not None, wrong
    typed = {"doc": "README.md", "quote": "took 5 s", "kind": "measured", "values": [5], "command": "time", "date": "x"}
    with pytest.raises(AssertionError, match="not a kind of source"):
        mismatch(typed)


def test_the_documented_grid_plans_the_jobs_its_comment_says(workdir, tmp_path):
    """docs/grids.md's example grid, saved as the page says, plans the number of jobs its dry run's comment
    states (no dataset needed for a plan)."""
    text = (ROOT / "docs/grids.md").read_text()
    grid = text.split("Save as `~/grids/c100_ring50.yaml`:")[1].split("```yaml\n")[1].split("```")[0]
    stated = int(re.search(r"c100_ring50\.yaml +# plan: (\d+) jobs", text).group(1))
    saved = tmp_path / "grids" / "c100_ring50.yaml"
    saved.parent.mkdir()
    saved.write_text(grid)
    plan = snakemake(
        workdir, "--profile", "profiles/local", "-n", "table1", "--config", f"grid={saved}", "data_root=/nonexistent"
    )
    assert job_counts(plan.stdout + plan.stderr)["total"] == stated
