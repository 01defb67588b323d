"""ring.reports.captions: what the report's captions say, read from the cells a table or figure read."""

import json
import re
from html import unescape

from ring.reports.captions import (
    cell_axes,
    cell_config,
    cell_metrics,
    feature_maps,
    outlook,
    outlook_block,
    shown_table,
)


def _metrics(path, values) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(values if isinstance(values, str) else json.dumps(values))
    return str(path)


def test_cell_metrics_keeps_the_readable_records_in_order_and_skips_the_rest(tmp_path):
    files = [
        _metrics(tmp_path / "a" / "metrics.json", {"method": "IR"}),
        str(tmp_path / "missing" / "metrics.json"),
        _metrics(tmp_path / "b" / "metrics.json", "{not json"),
        _metrics(tmp_path / "c" / "metrics.json", [1, 2]),  # JSON, but not a record
        _metrics(tmp_path / "d" / "metrics.json", {"method": "IRing"}),
    ]
    assert cell_metrics(files) == [{"method": "IR"}, {"method": "IRing"}]


def test_feature_maps_groups_the_methods_by_layer_and_shape(tmp_path):
    stamp = {"feature_layer": "layer4", "feature_shape": [512, 2, 2]}
    files = [
        _metrics(tmp_path / m / "metrics.json", {"method": m, "protocol": p})
        for m, p in [("IR", stamp), ("IRing", stamp), ("IR", stamp), ("MoCo", {"feature_layer": "pool"}), ("LA", 3)]
    ]
    assert feature_maps(files) == [
        {"layer": "layer4", "shape": "512 x 2 x 2", "methods": ["IR", "IRing"]},  # IR's second cell adds nothing
        {"layer": "pool", "shape": "unrecorded", "methods": ["MoCo"]},
        {"layer": "unrecorded", "shape": "unrecorded", "methods": ["LA"]},  # a protocol that is no record
    ]


def test_cell_axes_names_the_folder_levels_from_the_last_up():
    files = [
        "results/g/study/k/digits/IR/k16/seed0/encoder.pt",
        "results/g/study/k/digits/IR/k64/seed1/encoder.pt",
        "results/g/study/k/digits/IRing/k16/seed0/encoder.pt",
    ]
    assert cell_axes(files, ("seed", "variant", "method", "dataset")) == {
        "seed": ["0", "1"],
        "variant": ["k16", "k64"],
        "method": ["IR", "IRing"],
        "dataset": ["digits"],
    }
    assert cell_axes([], ("seed",)) == {"seed": []}


def test_cell_config_reads_the_first_readable_config_beside_the_files(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "config.yaml").write_text("lr: [unclosed\n")  # broken: its stage says so, the caption skips it
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "config.yaml").write_text("lr: 3e-2\nsource: cifar10\n")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "config.yaml").write_text("source: stl10\n")
    files = [tmp_path / d / "metrics.json" for d in ("missing", "a", "b", "c")]
    assert cell_config(files) == {"lr": 0.03, "source": "cifar10"}  # YAML 1.2: 3e-2 is a float, as the stages read
    assert cell_config(files[:2]) == {}


def render_caption(name: str, **params) -> str:
    """workflow/report/<name>.rst rendered as `snakemake --report` renders it (Jinja, then docutils), with ``params``
    as the rule passes them, on grid ``tiny``."""
    from types import SimpleNamespace

    import jinja2
    from docutils.core import publish_parts

    from tests import ROOT

    template = (ROOT / "workflow" / "report" / f"{name}.rst").read_text()
    snakemake = SimpleNamespace(params=SimpleNamespace(**params), wildcards=SimpleNamespace(grid="tiny"), input=[])
    rst = jinja2.Environment().from_string(template).render(snakemake=snakemake)
    return publish_parts(rst, writer="html", settings_overrides={"report_level": 2})["body"]


def test_the_gpu_hours_caption_opens_with_the_tables_outlook(tmp_path):
    """workflow/report/gpu_hours.rst with the params the rule passes: the outlook read back from the table
    (ring.reports.captions.outlook)."""
    lines = ["pretrain: 1 done, 1 running, 2 pending; 3 GPU-h spent, 4.5 GPU-h left", "grid tiny: 1 done; 2 h left"]
    table = tmp_path / "gpu_hours.md"
    table.write_text(f"**gpu_hours**: caption\n\n{outlook_block(lines, '2026-11-28 23:40 UTC')}\n| stage |\n")

    def render(outlook) -> str:
        provenance = ["results/tiny/pretrain/digits/IR/seed0/provenance.json"]
        return render_caption("gpu_hours", outlook=outlook, provenance=provenance)

    html = render(outlook(table))
    assert (
        html.index("pretrain: 1 done, 1 running") < html.index("grid tiny: 1 done; 2 h left") < html.index("per stage")
    )
    assert "2026-11-28 23:40 UTC" in html and "System Message" not in html
    assert "will end" not in render(outlook(tmp_path / "none.md"))  # before the table exists: no outlook


# A Table 1 as ring.reports.tables writes it, one mark of each kind: a diverged cell, a high-loss probe, a difference
# beyond the seed noise and one that one seed cannot test.
MARKED_TABLE = """**table1**: Linear evaluation top-1 (%) on frozen ResNet-18 features

| Method   | digits         | digits paper (ours − paper)   |
|:---------|:---------------|:------------------------------|
| IR       | 80.1 ± 1.2     | —                             |
| IRing    | 84.0 ± 0.9 (+3.9*) | —                         |
| CMC      | diverged [d1]  | —                             |
| MoCo     | 41.2 [h1]      | —                             |
| MoCoRing | 45.0 [h1] (+3.8 untested) | —                  |

mean ± std over seeds; a Ring row's difference marked * is beyond the seed noise. [d1] diverged, no accuracy: the \
probe's top-1 12.2% is within 3 standard errors of chance. [h1] accuracy measured, training loss high: 1.6e3.
"""


def test_a_tables_caption_shows_its_md_with_every_mark_beside_its_number(tmp_path):
    """The report carries a table as its CSV, numbers alone: each table's caption shows the .md's rows and notes
    (ring.reports.captions.shown_table), so the marks and their footnotes stand beside the numbers there too."""
    from tests.workflow.browser import table_rows

    table = tmp_path / "table1.md"
    table.write_text(MARKED_TABLE)
    params = {"methods": ["IR", "IRing"], "datasets": ["digits"], "features": []}
    html = render_caption("table1", shown=shown_table(table), **params)
    assert "System Message" not in html
    text = unescape(html)
    for row in table_rows(MARKED_TABLE):
        assert re.search(r" *\| *".join(map(re.escape, row)), text), row  # each row as the .md prints it
    for note in ("[d1] diverged, no accuracy", "[h1] accuracy measured, training loss high"):
        assert note in " ".join(text.split()), note
    for name in ("table1", "table2", "table3", "table4", "table_la_variants", "table_toy_cnce"):
        empty = render_caption(name, shown=shown_table(tmp_path / "none.md"), **params, source="", cells={}, toy={},
                               true_mi=None)  # fmt: skip
        assert "prints it" not in empty, name  # before the table exists: no block
