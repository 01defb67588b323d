"""ring.plan.detection_tasks: Table 4's three models, their columns, and the sentence for a missing Detectron2."""

import sys

import pytest

from ring.plan import detection_tasks
from ring.plan.detection_tasks import COLUMNS, METRICS, TASKS, missing_detectron2, task
from tests.conftest import ROOT


def test_table4_columns_are_the_published_ones():
    import yaml

    published = yaml.safe_load((ROOT / "ring" / "data" / "published-results.yaml").read_text())["table4_detection"]
    assert COLUMNS == published["columns"]


def test_columns_are_each_tasks_result_groups_times_ap_ap50_ap75_in_the_papers_order():
    assert COLUMNS[:6] == [f"coco_det_{m}" for m in METRICS] + [f"coco_seg_{m}" for m in METRICS]
    assert COLUMNS[6:] == [f"coco_kp_{m}" for m in METRICS] + [f"voc_det_{m}" for m in METRICS]
    assert task("voc_det").roi_heads == "BasicRes5ROIHeads" and task("coco_kp").roi_heads is None


def test_an_unknown_task_is_refused_with_the_choices():
    with pytest.raises(
        ValueError, match=r"^Unknown detection task 'lvis'; choose from coco_det_seg, coco_kp, voc_det\.$"
    ):
        task("lvis")
    assert task("coco_kp") is TASKS["coco_kp"]


@pytest.mark.parametrize("name", ["detectron2", "detectron2.modeling", "fvcore.common", "pycocotools", "yacs"])
def test_detectron2_or_one_of_its_requirements_missing_says_how_to_install_it(name):
    sentence = missing_detectron2(ModuleNotFoundError(f"No module named {name!r}", name=name))
    assert sentence.startswith(f"Detectron2 is not installed in this Python environment ({sys.executable}: no module ")
    # Issue 51: it named envs/ scripts a wheel does not have; the command it names ships in the package.
    assert "`ring install-detection`" in sentence and "`ring install-detection --cluster`" in sentence
    assert "envs/install-detectron2" not in sentence and sentence.count(". ") == 0
    assert sentence.endswith("(docs/detection.md, Install).")


def test_ring_install_detection_runs_the_installer_the_package_ships(monkeypatch, capsys):
    from ring import cli, resources
    from ring.plan import detection_tasks

    for flags, script in (([], "detectron2-cpu.sh"), (["--cluster"], "detectron2-cluster.sh")):
        assert cli.main(["install-detection", "--print", *flags]) == 0
        assert capsys.readouterr().out.split() == ["bash", str(resources.INSTALLERS / script), sys.executable]
        assert (resources.INSTALLERS / script).is_file()
    ran = []
    monkeypatch.setattr(
        detection_tasks.subprocess, "run", lambda line: ran.append(line) or type("R", (), {"returncode": 3})
    )
    assert cli.main(["install-detection"]) == 3  # the installer's exit status
    assert ran == [detection_tasks.installer(cluster=False)]
    # The scripts find their requirements beside them, not in a checkout's working folder.
    for script in detection_tasks.INSTALLERS.values():
        text = (resources.INSTALLERS / script).read_text()
        assert '"$HERE/../requirements-detection.txt"' in text and 'cd "$(dirname "$0")/.."' not in text


def test_every_pinned_detection_requirement_counts_and_other_modules_do_not():
    pinned = {
        line.split("#")[0].split("==")[0].strip().replace("-", "_")
        for line in (ROOT / "ring" / "resources" / "requirements-detection.txt").read_text().splitlines()
        if line.split("#")[0].strip()
    }
    assert detection_tasks._detection_modules() == pinned | {"detectron2"} and "iopath" in pinned
    for name in ("scipy", "detectron", "torch.distributed"):
        assert missing_detectron2(ModuleNotFoundError(name=name)) is None
    assert missing_detectron2(ModuleNotFoundError("no name")) is None  # a bare error names no module
