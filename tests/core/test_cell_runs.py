"""ring.core.cell_runs: what an edited cell config does to the cell's files (torch-free, decided before any job)."""

import json

import pytest

from ring.core import cell_runs, files
from ring.core.config import DetectionConfig, config_hash, hashed_values
from ring.core.stages import STAGES
from tests.helpers import lincls_config, pretrain_config


def _ran(cell, cfg, files=("checkpoint.pt", "encoder.pt", "export.json", "log.jsonl", "provenance.json")):
    """A cell as a stage leaves it: its record and a file per name holding the config's hash."""
    cell.mkdir(parents=True, exist_ok=True)
    cell_runs.write_record(cell, cfg)
    for name in files:
        (cell / name).write_text(config_hash(cfg))
    (cell / "slurm").mkdir(exist_ok=True)
    (cell / "slurm" / "job.json").write_text("{}")  # the launcher's, never moved


def test_an_unchanged_hash_does_nothing(tmp_path):
    cfg = pretrain_config("IR", epochs=1)
    _ran(tmp_path, cfg)
    lines = []
    assert (
        cell_runs.prepare(tmp_path, "pretrain", pretrain_config("IR", epochs=1, num_workers=3), log=lines.append)
        == "nothing"
    )
    assert lines == [] and not (tmp_path / "runs").exists()


def test_a_cell_that_never_ran_does_nothing(tmp_path):
    assert cell_runs.prepare(tmp_path, "pretrain", pretrain_config("IR")) == "nothing"


def test_a_longer_schedule_continues_and_keeps_only_the_shorter_runs_outputs_aside(tmp_path):
    old, new = pretrain_config("IR", epochs=1), pretrain_config("IR", epochs=3)
    _ran(tmp_path, old)
    lines = []
    assert cell_runs.prepare(tmp_path, "pretrain", new, log=lines.append) == "continue"
    aside = tmp_path / "runs" / config_hash(old)
    assert lines == [
        f"ring: {tmp_path}: its config changed (epochs): continuing from its checkpoint to epochs=3; "
        f"the 1-epoch encoder is kept in {aside}"
    ]
    assert sorted(p.name for p in aside.iterdir()) == ["encoder.pt", "export.json", "run.json"]
    assert cell_runs.read_run_record(aside)["config_hash"] == config_hash(old)  # what an undo needs to restore it
    assert (tmp_path / "checkpoint.pt").read_text() == config_hash(old)  # the stage continues it
    # The stage decides again when it starts (for configs written by hand): the same decision, said once (issue 34).
    assert cell_runs.prepare(tmp_path, "pretrain", new, log=lines.append) == "continue" and len(lines) == 1


def test_a_longer_schedule_of_a_cell_without_its_checkpoint_starts_over_keeping_the_finished_run(tmp_path):
    # keep_checkpoint: none dropped the finished run's checkpoints: nothing to continue, so the run is kept whole
    # (an undo brings it back finished) and the cell trains the longer schedule from scratch.
    old, new = pretrain_config("IR", epochs=1, keep_checkpoint="none"), pretrain_config("IR", epochs=3)
    _ran(tmp_path, old, files=("encoder.pt", "export.json", "log.jsonl", "provenance.json"))
    aside, lines = tmp_path / "runs" / config_hash(old), []
    decision = cell_runs.prepare(tmp_path, "pretrain", new, log=lines.append)
    said = (
        f"ring: {tmp_path}: its config changed (epochs), and no checkpoint is left to continue (keep_checkpoint: "
        f"none): the previous run is kept in {aside} and this cell starts over"
    )
    assert (decision, lines) == ("start over", [said])
    assert sorted(p.name for p in aside.iterdir()) == [
        "encoder.pt",
        "export.json",
        "log.jsonl",
        "provenance.json",
        files.RUN_RECORD,
    ]
    assert not (tmp_path / "log.jsonl").exists() and not (tmp_path / files.RUN_RECORD).exists()


@pytest.mark.parametrize(
    "new, keys",
    [
        (pretrain_config("IR", epochs=1, lr=0.1), "lr"),
        (
            pretrain_config("IR", epochs=1, bank_negatives=128),
            "bank_negatives",
        ),  # ring_w_l: IR never reads it (no edit)
        (pretrain_config("IR", epochs=2, lr=0.1), "epochs, lr"),  # a longer schedule and more: starts over
    ],
)
def test_any_other_edit_keeps_the_whole_previous_run_aside_and_starts_over(tmp_path, new, keys):
    old = pretrain_config("IR", epochs=1)
    _ran(tmp_path, old)
    lines = []
    assert cell_runs.prepare(tmp_path, "pretrain", new, log=lines.append) == "start over"
    aside = tmp_path / "runs" / config_hash(old)
    assert lines[0] == (
        f"ring: {tmp_path}: its config changed ({keys}): the previous run is kept in {aside} and this cell starts over"
    )
    # keep_superseded: results (the default) drops the superseded run's checkpoint, and says so.
    assert len(lines) == 2 and lines[1].startswith(
        f"ring: {tmp_path}: dropped the superseded run's 1 checkpoint file(s)"
    )
    assert sorted(p.name for p in aside.iterdir()) == [
        "encoder.pt",
        "export.json",
        "log.jsonl",
        "provenance.json",
        "run.json",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs", "slurm"]


def test_keep_superseded_all_keeps_the_checkpoints_and_snapshots(tmp_path):
    old = pretrain_config("IR", epochs=1)
    _ran(tmp_path, old, files=("checkpoint.pt", "checkpoint.prev.pt", "snapshot_epoch0.pt", "encoder.pt"))
    lines = []
    new = pretrain_config("IR", epochs=1, lr=0.1, keep_superseded="all")
    assert config_hash(new) == config_hash(pretrain_config("IR", epochs=1, lr=0.1))  # a runtime key
    assert cell_runs.prepare(tmp_path, "pretrain", new, log=lines.append) == "start over" and len(lines) == 1
    assert sorted(p.name for p in (tmp_path / "runs" / config_hash(old)).iterdir()) == [
        "checkpoint.prev.pt",
        "checkpoint.pt",
        "encoder.pt",
        "run.json",
        "snapshot_epoch0.pt",
    ]


def test_a_shorter_schedule_starts_over(tmp_path):
    _ran(tmp_path, pretrain_config("IR", epochs=3))
    assert cell_runs.prepare(tmp_path, "pretrain", pretrain_config("IR", epochs=2)) == "start over"


def test_an_undone_edit_brings_the_kept_run_back(tmp_path):
    first, second = (
        pretrain_config("IR", epochs=1, keep_superseded="all"),
        pretrain_config("IR", epochs=1, lr=0.1, keep_superseded="all"),
    )
    _ran(tmp_path, first)
    cell_runs.prepare(tmp_path, "pretrain", second, log=lambda line: None)
    _ran(tmp_path, second)
    lines = []
    assert cell_runs.prepare(tmp_path, "pretrain", first, log=lines.append) == "restore"
    assert lines == [
        f"ring: {tmp_path}: its config changed (lr): the previous run is kept in "
        f"{tmp_path / 'runs' / config_hash(second)}, and the run of this config kept in "
        f"{tmp_path / 'runs' / config_hash(first)} is back in place (it resumes there)"
    ]
    assert (tmp_path / "encoder.pt").read_text() == config_hash(first)
    assert json.loads((tmp_path / "run.json").read_text())["config_hash"] == config_hash(first)
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [config_hash(second)]


def _finished(cell, cfg):
    """A finished pretraining run as ring.pretrain leaves it: its record, an encoder with its kept copy and checksum
    record, its log and checkpoint."""
    from ring.core.files import keep_exports, record_checksums

    _ran(cell, cfg, files=("checkpoint.pt", "log.jsonl"))
    (cell / "encoder.pt").write_bytes(config_hash(cfg).encode() * 100)
    keep_exports(cell, ["encoder.pt"])
    record_checksums(cell, ["encoder.pt"], config_hash=config_hash(cfg))


def test_an_undone_edit_restores_a_finished_run_without_its_checkpoint_as_finished(tmp_path):
    first, second = pretrain_config("IR", epochs=1), pretrain_config("IR", epochs=1, lr=0.1)
    _finished(tmp_path, first)
    cell_runs.prepare(tmp_path, "pretrain", second, log=lambda line: None)
    assert not (tmp_path / "runs" / config_hash(first) / "checkpoint.pt").exists()
    _ran(tmp_path, second, files=("checkpoint.pt", "log.jsonl"))  # the edited run, unfinished
    lines = []
    assert cell_runs.prepare(tmp_path, "pretrain", first, log=lines.append) == "restore"
    assert (
        "is back in place (finished: its encoder verifies against its checksum record, so nothing retrains)" in lines[0]
    )
    assert cell_runs.finished_exports(tmp_path, config_hash(first)) and not (tmp_path / "checkpoint.pt").exists()
    # The unfinished edited run, its checkpoint dropped, is no run to come back to: undoing again starts over.
    assert cell_runs.prepare(tmp_path, "pretrain", second, log=lambda line: None) == "start over"
    kept = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert kept == sorted([config_hash(first), config_hash(second)])
    # Its encoder altered in place comes back as its kept copy (a copy, which the alteration did not reach).
    (tmp_path / "runs" / config_hash(first) / "encoder.pt").write_bytes(b"altered")
    _ran(tmp_path, second, files=("log.jsonl",))
    assert cell_runs.prepare(tmp_path, "pretrain", first, log=lambda line: None) == "restore"
    assert (tmp_path / "encoder.pt").read_bytes() == config_hash(first).encode() * 100
    # A finished run whose encoder and kept copy were both altered does not verify: it is not restored.
    cell_runs.prepare(tmp_path, "pretrain", second, log=lambda line: None)
    for path in (tmp_path / "runs" / config_hash(first)).glob("**/encoder.pt"):
        path.write_bytes(b"altered")
    _ran(tmp_path, second, files=("log.jsonl",))
    assert cell_runs.prepare(tmp_path, "pretrain", first, log=lambda line: None) == "start over"


def test_an_evaluation_cell_keeps_its_metrics_aside_when_its_config_changes(tmp_path):
    old = lincls_config(method="IR")
    _ran(tmp_path, old, files=("checkpoint.pt", "metrics.json", "log.jsonl"))
    assert (
        cell_runs.prepare(tmp_path, "lincls", lincls_config(method="IR", lr=0.1), log=lambda line: None) == "start over"
    )
    assert (tmp_path / "runs" / config_hash(old) / "metrics.json").read_text() == config_hash(old)
    # An evaluation never continues: its only schedule key, epochs, changes its number.
    assert not cell_runs.continues("lincls", hashed_values(old), hashed_values(lincls_config(method="IR", epochs=200)))


def test_exports_deleted_by_snakemake_are_restored_from_the_kept_copies_only_when_they_verify(tmp_path):
    from ring.core.files import KEPT, keep_exports, record_checksums

    cfg = pretrain_config("CMC", epochs=1)
    for name in ("encoder.pt", "encoder_ab.pt"):
        (tmp_path / name).write_bytes(name.encode() * 100)
    keep_exports(tmp_path, ["encoder.pt", "encoder_ab.pt"])
    record_checksums(tmp_path, ["encoder.pt", "encoder_ab.pt"], config_hash=config_hash(cfg))
    originals = {n: (tmp_path / n).read_bytes() for n in ("encoder.pt", "encoder_ab.pt")}
    for name in originals:
        (tmp_path / name).unlink()  # what Snakemake does to a rerun job's declared outputs
    assert cell_runs.restore_exports(tmp_path, pretrain_config("CMC", epochs=2)) == []  # another config's: not restored
    assert sorted(cell_runs.restore_exports(tmp_path, cfg)) == ["encoder.pt", "encoder_ab.pt"]
    assert {n: (tmp_path / n).read_bytes() for n in originals} == originals
    (tmp_path / "encoder.pt").unlink()
    (tmp_path / KEPT / "encoder_ab.pt").write_bytes(b"altered")
    assert cell_runs.restore_exports(tmp_path, cfg) == [] and not (tmp_path / "encoder.pt").exists()


def test_a_second_client_of_a_cell_waits_for_the_first(tmp_path):
    import subprocess
    import sys
    import time

    from ring.cluster.launch import cell_lock

    code = (
        "import sys; from pathlib import Path; from ring.cluster.launch import cell_lock\n"
        "with cell_lock(Path(sys.argv[1])): print('inside', flush=True)"
    )
    waiting = f"ring: {tmp_path}: another client is attached to this cell; waiting for it"
    with cell_lock(tmp_path):
        second = subprocess.Popen(
            [sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        # Until it says it waits (its imports take seconds on a busy host: a fixed sleep let it in after the release,
        # without waiting); it must not get in while this one holds the cell.
        deadline, said = time.monotonic() + 120, ""
        while waiting not in said and time.monotonic() < deadline and second.poll() is None:
            said += second.stderr.readline()
        assert waiting in said and second.poll() is None, said
        time.sleep(0.5)
        assert second.poll() is None
    out, err = second.communicate(timeout=60)
    assert out == "inside\n", (out, said + err)


@pytest.mark.parametrize("stage", ["lincls", "transfer"])
def test_an_evaluation_is_kept_per_encoder_and_collected_torch_free(tmp_path, stage):
    """Issue 32 item 3 / issue 34 item 4 on the login node: a retrained encoder keeps the old evaluation under
    runs/<hash>-<sha[:12]>/ (its outputs Snakemake deleted put back from their kept copies), and the restored
    encoder's kept evaluation is collected whole, verified by checksum."""
    from ring.core.files import record_checksums

    pretrain, cell = tmp_path / "pretrain", tmp_path / "cell"
    pretrain.mkdir()
    cfg = lincls_config(method="IR")

    def encoder(content: bytes) -> str:  # a pretraining cell exports an encoder: its fingerprint
        (pretrain / "encoder.pt").write_bytes(content)
        return record_checksums(pretrain, ["encoder.pt"])["files"]["encoder.pt"]

    def evaluate(sha: str) -> None:  # the stage, as LinearEval.run leaves its cell
        cell.mkdir(exist_ok=True)
        cell_runs.write_record(cell, cfg, sha)
        for name in STAGES[stage].exported:
            (cell / name).write_text(f"{name} of {sha}")
        (cell / "checkpoint.pt").write_text(sha)
        cell_runs.keep_outputs(cell, stage, cfg, sha)

    old = encoder(b"old")
    assert not cell_runs.collect(cell, stage, cfg, pretrain / "encoder.pt")  # never evaluated: the stage runs
    evaluate(old)
    for name in STAGES[stage].exported:
        (cell / name).unlink()  # Snakemake deleted a finished job's outputs: collected, nothing runs
    assert cell_runs.collect(cell, stage, cfg, pretrain / "encoder.pt")
    assert (cell / "metrics.json").read_text() == f"metrics.json of {old}"

    new = encoder(b"retrained")
    (cell / "metrics.json").unlink()
    lines = []
    assert not cell_runs.collect(cell, stage, cfg, pretrain / "encoder.pt", log=lines.append)
    kept = cell / "runs" / f"{config_hash(cfg)}-{old[:12]}"
    assert "the encoder it evaluates changed" in lines[0] and str(kept) in lines[0]
    # keep_superseded: results (the default) keeps what a table could need and drops the probe's checkpoint.
    assert (kept / "metrics.json").read_text() == f"metrics.json of {old}" and not (kept / "checkpoint.pt").exists()
    assert sorted(p.name for p in cell.iterdir()) == ["runs"]
    evaluate(new)

    encoder(b"old")  # the pretraining edit undone
    (cell / "metrics.json").unlink()
    assert cell_runs.collect(cell, stage, cfg, pretrain / "encoder.pt", log=lines.append)
    assert (
        any("is back in place" in line for line in lines)
        and (cell / "metrics.json").read_text() == f"metrics.json of {old}"
    )
    assert [p.name for p in (cell / "runs").iterdir()] == [f"{config_hash(cfg)}-{new[:12]}"]
    (cell / "exported" / "metrics.json").write_text("altered")  # a copy that does not verify is never used
    (cell / "metrics.json").unlink()
    assert not cell_runs.collect(cell, stage, cfg, pretrain / "encoder.pt") and not (cell / "metrics.json").exists()


def test_an_evaluation_config_edit_and_its_undo_keep_the_encoder_in_the_runs_name(tmp_path):
    """The config rule runs ring.core.cell_runs without an encoder: a runtime knob moves nothing, an edit keeps the run
    under runs/<old hash>-<encoder>/, and its undo brings that run back."""
    # keep_superseded: all, as these runs keep no verified copies of their outputs: the checkpoint is what restores.
    old, new = lincls_config(method="IR"), lincls_config(method="IR", lr=0.1, keep_superseded="all")
    _ran(tmp_path, old, files=("checkpoint.pt", "metrics.json"))
    cell_runs.write_record(tmp_path, old, "e" * 64)
    assert cell_runs.prepare(tmp_path, "lincls", lincls_config(method="IR", num_workers=3)) == "nothing"
    assert cell_runs.prepare(tmp_path, "lincls", new, log=lambda line: None) == "start over"
    assert (tmp_path / "runs" / f"{config_hash(old)}-{'e' * 12}" / "metrics.json").is_file()
    _ran(tmp_path, new, files=("checkpoint.pt", "metrics.json"))
    cell_runs.write_record(tmp_path, new, "e" * 64)
    assert cell_runs.prepare(tmp_path, "lincls", old, log=lambda line: None) == "restore"
    assert (tmp_path / "metrics.json").read_text() == config_hash(old)


@pytest.mark.parametrize("method", ["IR", "CMC"])
def test_a_finished_detection_cell_is_collected_for_its_backbone_only(tmp_path, method):
    """Issue 34 item 4 for Table 4: metrics.json kept with its backbone's SHA-256 comes back without a job; after
    the backbone is converted again (another encoder) it does not, and the cell runs."""
    from ring.core.files import record_checksums

    weights, cell = tmp_path / "backbone" / "backbone.pkl", tmp_path / "cell"
    weights.parent.mkdir()
    cell.mkdir()
    cfg = DetectionConfig(task="voc_det", method=method, source="digits", num_gpus=0)

    def convert(content: bytes) -> str:
        weights.write_bytes(content)
        return record_checksums(weights.parent, ["backbone.pkl"])["files"]["backbone.pkl"]

    sha = convert(b"converted")
    (cell / "metrics.json").write_text("{}")
    cell_runs.keep_outputs(cell, "detection", cfg, sha)  # as ring.detection.runner.write_metrics leaves the cell
    (cell / "metrics.json").unlink()
    assert cell_runs.collect(cell, "detection", cfg, weights) and (cell / "metrics.json").read_text() == "{}"
    # A backbone damaged since (its record untouched) was taken at its record's word, "complete".
    weights.write_bytes(b"converteD")
    (cell / "metrics.json").unlink()
    assert not cell_runs.collect(cell, "detection", cfg, weights) and not (cell / "metrics.json").exists()
    weights.write_bytes(b"converted")  # converted again: the same bytes, so the same evaluation
    assert cell_runs.collect(cell, "detection", cfg, weights) and (cell / "metrics.json").read_text() == "{}"
    convert(b"converted from a retrained encoder")
    (cell / "metrics.json").unlink()
    assert not cell_runs.collect(cell, "detection", cfg, weights) and not (cell / "metrics.json").exists()


def test_a_detection_run_of_a_reconverted_backbone_is_kept_and_an_undo_brings_it_back(tmp_path):
    """Issue 52 item 5: a detection cell kept no runs/; a backbone converted from a retrained encoder now sets the
    previous run aside (Detectron2's checkpoints dropped under keep_superseded: results), and the encoder restored
    (the same backbone converted again) brings that run back finished, collected without a job."""
    from ring.core.files import record_checksums

    weights, cell = tmp_path / "backbone" / "backbone.pkl", tmp_path / "cell"
    weights.parent.mkdir()
    cell.mkdir()
    cfg = DetectionConfig(task="voc_det", method="IR", source="digits", num_gpus=0)

    def convert(content: bytes) -> str:
        weights.write_bytes(content)
        return record_checksums(weights.parent, ["backbone.pkl"])["files"]["backbone.pkl"]

    sha = convert(b"converted")
    cell_runs.write_record(cell, cfg, sha)  # as ring.detection.runner leaves a finished cell
    for name in ("model_final.pth", "last_checkpoint", "log.txt", "metrics.json"):
        (cell / name).write_text(name)
    cell_runs.keep_outputs(cell, "detection", cfg, sha)
    convert(b"converted from a retrained encoder")
    lines = []
    assert not cell_runs.collect(cell, "detection", cfg, weights, log=lines.append)
    kept = cell / "runs" / cell_runs.run_key(config_hash(cfg), sha)
    assert "the encoder it evaluates changed" in lines[0] and str(kept) in lines[0]
    assert sorted(p.name for p in kept.iterdir()) == ["export.json", "exported", "log.txt", "metrics.json", "run.json"]
    assert not any(cell.glob("*.pth")) and not (cell / "metrics.json").exists()
    convert(b"converted")  # the encoder's edit undone before the cell ran again: the same backbone, converted again
    assert cell_runs.collect(cell, "detection", cfg, weights, log=lines.append) and "back in place" in lines[-1]
    assert (cell / "metrics.json").read_text() == "metrics.json" and not kept.exists()


def test_an_undone_and_redone_epochs_edit_restores_each_finished_run_and_trains_nothing(tmp_path):
    """Issue 40 item 6: the shorter run a longer epochs continued past had no run.json, so the undo retrained it
    from scratch; the redo then continued from that new checkpoint although the finished longer run was kept."""
    short, long = pretrain_config("IR", epochs=1), pretrain_config("IR", epochs=3)
    _finished(tmp_path, short)
    short_encoder = (tmp_path / "encoder.pt").read_bytes()
    assert cell_runs.prepare(tmp_path, "pretrain", long, log=lambda line: None) == "continue"
    _finished(tmp_path, long)  # the stage continued to epochs=3 and exported
    long_encoder = (tmp_path / "encoder.pt").read_bytes()
    for cfg, encoder in ((short, short_encoder), (long, long_encoder), (short, short_encoder)):
        lines = []
        assert cell_runs.prepare(tmp_path, "pretrain", cfg, log=lines.append) == "restore", lines
        assert (tmp_path / "encoder.pt").read_bytes() == encoder
        assert cell_runs.finished_exports(tmp_path, config_hash(cfg))
        if not (tmp_path / "checkpoint.pt").is_file():  # a finished run whose checkpoint went trains nothing
            assert "finished: its encoder verifies against its checksum record, so nothing retrains" in lines[0]
