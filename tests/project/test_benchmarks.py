"""The benchmark scripts run (at a tiny size); their real figures are committed under ring/resources/figures/."""

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from benchmarks import suite_summary
from tests import ROOT


def run_tiny(script: str) -> dict:
    subprocess.run(
        [sys.executable, f"benchmarks/{script}.py", "--tiny"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return json.loads((ROOT / "ring" / "resources" / "figures" / f".tiny-{script}.json").read_text())


@pytest.mark.slow
def test_ring_selection_benchmark_asserts_the_same_set_and_measures_memory():
    result = run_tiny("ring_selection")
    assert all(row["same_set"] and row["speedup"] > 0 for row in result["selection"])
    assert {row["ring"] for row in result["steps"]} == {"IRing", "MoCoRing"}
    assert result["memory"]["selection_peak_bytes"] < result["memory"]["full_similarity_bytes"]
    assert len(result["draw"]) == 2 and all(row["same_draws"] and row["draw_speedup"] > 0 for row in result["draw"])
    parts = ("similarity_s", "bounds_s", "mask_s", "draw_s")  # issue 39: where IRing's selection spends its time
    assert [row["window"] for row in result["parts"]] == [[0.0, 90.0], [90.0, 99.0]]
    assert all(row[p] > 0 for row in result["parts"] for p in parts)
    assert all(abs(sum(row["shares"].values()) - 1) < 1e-9 for row in result["parts"])


@pytest.mark.slow
def test_ring_radix_benchmark_asserts_the_same_bounds_and_draws_and_says_which_it_keeps():
    """Issue 48: the radix candidate's bounds equal _row_bounds's (ties, signs and zeros included) before it is timed;
    the committed CPU result says the library keeps topk, as ring.engine.objectives.ring does."""
    result = run_tiny("ring_radix")
    assert result["same_bounds"] and all(row["same_draws"] for row in result["windows"])
    assert [row["window"] for row in result["windows"]] == [[0.0, 90.0], [45.0, 94.5], [90.0, 99.0]]
    assert all(row[f"bounds_{name}_s"] > 0 for row in result["windows"] for name in ("topk", "radix"))
    assert all(result[key] > 0 for key in ("ir_draw_s", "similarity_s", "la_top4096_s"))
    assert result["objectives"]["iring_over_ir_topk"] > 0 and result["kept"] in ("topk", "radix")
    committed = json.loads((ROOT / "ring" / "resources" / "figures" / "ring_radix-cpu.json").read_text())
    assert committed["n"] == 200_000 and committed["kept"] == "topk"


@pytest.mark.parametrize("candidate", ["radix", "partition"])
def test_one_selection_bounds_are_the_row_bounds_on_ties_signs_and_zeros(candidate):
    """Each candidate's exactness on the hard cases, directly: a bit-pattern selection that ignored the sign flip or
    the -0.0 / 0.0 pair, or a partition that placed one rank and read the other unplaced, would pick other values."""
    import torch

    from benchmarks.ring_radix import CANDIDATES, _tied_rows
    from ring.engine.objectives import ring as ring_objective

    one_selection = CANDIDATES[candidate]
    g = torch.Generator().manual_seed(0)
    rows = torch.cat([_tied_rows(6, 2000, g), torch.randn(3, 2000, generator=g)])
    for window in ((0.0, 90.0), (90.0, 99.0), (30.0, 80.0), (0.0, 100.0), (49.9, 50.1), (99.8, 99.9)):
        ranks = ring_objective.window_ranks(2000, *window)
        for old, new in zip(ring_objective._topk_bounds(rows, *ranks), one_selection(rows, *ranks), strict=True):
            assert torch.equal(old, new), window


def test_the_performance_page_states_the_committed_cpu_bounds_figures():
    """docs/performance.md's figures for the CPU's window bounds are benchmarks/ring_radix.py's sentence of the
    committed result (none typed by hand), and the library selects as that result decided."""
    from benchmarks.ring_radix import stated

    result = json.loads((ROOT / "ring" / "resources" / "figures" / "ring_partition-cpu.json").read_text())
    page = " ".join((ROOT / "docs" / "performance.md").read_text().split())  # the page wraps its lines
    assert stated(result) in page, "put benchmarks.ring_radix.stated(ring_partition-cpu.json) in docs/performance.md"
    assert result["same_bounds"] and all(row["same_draws"] for row in result["windows"])
    assert result["kept"] == "partition"  # ring.engine.objectives.ring._row_bounds's choice on the CPU


@pytest.mark.slow
def test_view_draws_benchmark_times_both_draws_per_worker_after_the_prefetch_queue():
    """Issue 48: the loader per worker with each draw, on both device-view inputs, recording workers and store."""
    result = run_tiny("view_draws")
    assert set(result["draw_ms_per_batch"]) == {"sample", "batch"} and result["draw_speedup"] > 0
    assert result["workers"] == [1, 2] and result["store"].startswith("jpeg95")
    for rates in result["loader_images_per_s_per_worker"].values():
        assert set(rates) == {"1_workers", "2_workers"} and all(
            r["sample"] > 0 and r["batch"] > 0 for r in rates.values()
        )


@pytest.mark.slow
def test_kmeans_assign_benchmark_asserts_the_same_labels_and_times_both():
    """Issue 48: the tiled assignment against the chunked one it replaced, on LA's default clusters."""
    result = run_tiny("kmeans_assign")
    assert result["same_labels_beyond_near_ties"] and result["k"] == 1000  # LA's default kmeans_k
    assert result["tile_elements"] < result["chunk_before_elements"]
    assert all(result[key] > 0 for key in ("before_s", "tiled_s", "before_again_s", "speedup"))


@pytest.mark.slow
def test_store_loader_benchmark_measures_every_pass_of_the_store():
    """benchmarks/store_loader.py at --tiny size: photo-like originals (ImageNet's ~110 KB), both stores built by the
    prepare stage's code, each pass's per-core rate and the loaders; the views need a GPU."""
    result = run_tiny("store_loader")
    assert 90_000 < float(result["original"].split(" KB")[0].rsplit(" ", 1)[1]) * 1000 < 130_000
    assert set(result["per_core_images_per_s"]) == {
        "original_decode_resize",
        "store_jpeg95_decode",
        "store_raw_read",
        "eval_original",
        "eval_store_jpeg95",
        "eval_store_raw",
    }
    assert all(v > 0 for v in [*result["per_core_images_per_s"].values(), *result["loader_images_per_s"].values()])
    assert result["store_bytes_per_image"]["raw"] == 256 * 256 * 3 and result["timed_batches"] >= 2
    assert result["views_per_s"] == {
        "store_device": None,
        "store_device_compiled": None,
        "gpu_decode": None,
        "store_gpu_device_compiled": None,
    }
    assert result["skipped"].startswith("views_per_s: no CUDA device") and "gpu_decode_pixels" not in result


@pytest.mark.slow
def test_eval_input_benchmark_times_both_inputs_of_every_evaluation_view():
    """benchmarks/eval_input.py at --tiny size: today's PIL views and the device views, of both stores, for the centre
    view and linear evaluation's crop and flip; the committed CPU figure was timed past the loader's prefetch."""
    result = run_tiny("eval_input")
    assert set(result["images_per_s"]) == {f"{f}_{a}" for f in ("jpeg95", "raw") for a in ("none", "crop_flip")}
    assert all(row["before"] > 0 and row["after"] > 0 for row in result["images_per_s"].values())
    committed = json.loads((ROOT / "ring" / "resources" / "figures" / "eval_input-cpu.json").read_text())
    assert committed["timed_batches"] >= 3 * 2 * committed["workers"]


@pytest.mark.slow
def test_data_pipeline_benchmark():
    result = run_tiny("data_pipeline")
    assert result["augmented_images_per_s"] > 0 and result["device_tensor_images_per_s"] > 0


# Every target of issue 31 the suite's summary lists (benchmarks/suite_summary.py), spelled out.
TARGET_IDS = {
    "moco_eager",
    "moco_compiled",
    "jpeg_path",
    "mocoring_ratio",
    "iring_ratio",
    "estimate_paper",
    "sync_step_MoCo",
    "sync_step_IR",
    *(f"pipeline_{m}{c}" for m in ("IR", "MoCo", "CMC", "LA") for c in ("", "_compile")),
    "store_IR_compile",  # issue 39: the prepared store's path against the in-memory one
    "store_MoCo_compile",
    "store_gpu_IR_compile",  # the same, its records decoded by the GPU decoder (store_decode: gpu)
    "store_gpu_MoCo_compile",
    "store_gpu_pixels",  # benchmarks/decode_pixels.py: nvJPEG within two compliant decoders' bound of PIL's pixels
    "store_gpu_pixels_mean",
    "stream_sanitizer",  # benchmarks/stream_sanitizer.py: CSAN finds no race as shipped, catches the planted one
}
FULL_PLAN = [
    "throughput_IR",
    "throughput_MoCo",
    "throughput_CMC",
    "throughput_LA",
    "throughput_MoCo_channels_last",
    "ring_selection",
    "jpeg_decode",
    "store_loader",
    "sync_step",
    "decode_pixels",
    "stream_sanitizer",
    "throughput_MoCo_compile",
    "throughput_IR_compile",
    "throughput_CMC_compile",
    "throughput_LA_compile",
]
QUICK_PLAN = [
    "sync_step",
    "decode_pixels",
    "stream_sanitizer",
    "jpeg_decode",
    "store_loader",
    "ring_selection",
    "throughput_MoCo_compile",
    "throughput_IR_compile",
]


def _run_suite(out: Path, tmp: Path, only: str, *args: str) -> tuple[dict, tarfile.TarFile]:
    """benchmarks/gpu_suite.sh at --tiny size on the CPU, with pandas, scikit-learn, tqdm and scipy unimportable
    (the GPU machines' python3 has torch, torchvision, numpy, pillow and pyyaml only)."""
    block = tmp / "block"
    block.mkdir()
    (block / "sitecustomize.py").write_text(
        "import sys\nfor m in ('pandas', 'sklearn', 'tqdm', 'scipy'):\n    sys.modules[m] = None\n"
    )
    env = {
        **os.environ,
        "OUT": str(out),
        "PYTHON": sys.executable,
        "RING_SUITE_TINY": "1",
        "RING_SUITE_ONLY": only,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": str(block),
        "TMPDIR": str(tmp),
        # The GPU time limits are seconds; a shared CI CPU must not turn slowness into a failure.
        "RING_SUITE_TIMEOUT_S": "1500",
        "RING_SUITE_BUDGET_S": "3000",
    }
    subprocess.run(
        ["bash", "benchmarks/gpu_suite.sh", *args], cwd=ROOT, env=env, check=True, capture_output=True, timeout=3000
    )
    # The lent GPU machines return at most 8 files: the suite leaves three, its scratch folder is gone.
    assert sorted(p.name for p in out.rglob("*")) == ["results.tar.gz", "summary.json", "summary.md"]
    assert [p.name for p in tmp.iterdir()] == ["block"]
    summary = json.loads((out / "summary.json").read_text())
    assert {row["id"] for row in summary["targets"]} == TARGET_IDS
    md = (out / "summary.md").read_text()
    assert all(f"| {target} |" in md for target in TARGET_IDS)
    return summary, tarfile.open(out / "results.tar.gz")


@pytest.mark.slow
def test_gpu_suite_brings_every_result_back_in_three_files(tmp_path):
    """The full suite at --tiny size, three of its benchmarks: results, logs and suite.json in one archive."""
    (tmp_path / "tmp").mkdir()
    summary, tar = _run_suite(tmp_path / "out", tmp_path / "tmp", "throughput_IR jpeg_decode sync_step")
    assert [r["name"] for r in summary["runs"]] == FULL_PLAN and summary["mode"] == "full"
    ran = {r["name"]: r["rc"] for r in summary["runs"] if not r["skipped"]}
    assert ran == {"throughput_IR": 0, "jpeg_decode": 0, "sync_step": 0}
    assert {r["skipped"] for r in summary["runs"] if r["name"] not in ran} == {"not in RING_SUITE_ONLY"}
    names = set(tar.getnames())
    assert {
        ".tiny-throughput_IR.json",
        ".tiny-jpeg_decode.json",
        ".tiny-sync_step.json",
        "suite.json",
        "logs/throughput_IR.log",
        "logs/nvidia-smi.txt",
    } <= names
    ir = json.loads(tar.extractfile(".tiny-throughput_IR.json").read())
    assert set(ir["images_per_s"]) == {"synthetic", "device", "pil"} and ir["machine"]["torch"]
    assert ir["first_step_s"] > 0 and ir["eval_pil_images_per_s_one_process"] > 0
    jpeg = json.loads(tar.extractfile(".tiny-jpeg_decode.json").read())
    assert 90 <= jpeg["mean_file_kb"] <= 130  # photo-like files of ImageNet's ~110 KB (benchmarks/jpeg_decode.py)
    rows = {row["id"]: row for row in summary["targets"]}
    rates = ir["images_per_s"]
    assert rows["pipeline_IR"]["measured"] == pytest.approx(rates["device"] / rates["synthetic"])
    assert rows["sync_step_MoCo"]["measured"] == "skipped: no CUDA"  # the step under sync debug mode needs CUDA
    written = suite_summary.unpack(tmp_path / "out" / "results.tar.gz", tmp_path / "results")
    assert sorted(p.name for p in written) == [
        ".tiny-jpeg_decode.json",
        ".tiny-sync_step.json",
        ".tiny-throughput_IR.json",
    ]


@pytest.mark.slow
def test_gpu_suite_quick_mode_plans_its_benchmarks_in_four_minutes(tmp_path):
    (tmp_path / "tmp").mkdir()
    summary, tar = _run_suite(tmp_path / "out", tmp_path / "tmp", "sync_step", "--quick")
    assert summary["mode"] == "quick" and [r["name"] for r in summary["runs"]] == QUICK_PLAN
    suite = json.loads(tar.extractfile("suite.json").read())
    assert suite["budget_s"] == 3000 and suite["mode"] == "quick"  # RING_SUITE_BUDGET_S; 240 by default
    assert "RING_SUITE_BUDGET_S:-240" in (ROOT / "benchmarks" / "gpu_suite.sh").read_text()


def test_suite_summary_checks_targets_against_the_results(tmp_path):
    machine = {"device": "NVIDIA H200", "torch": "2.11.0", "cuda": "13.0", "date": "2026-11-28T00:00:00Z"}

    def result(name, **doc):
        (tmp_path / f"{name}-NVIDIA_H200.json").write_text(json.dumps({"machine": machine, **doc}))

    result(
        "throughput_MoCo_compile",
        method="MoCo",
        compile=True,
        image_size=224,
        images_per_s={"synthetic": 9000.0, "device": 8500.0, "store": 8000.0, "store_gpu": 7000.0},
    )
    result(
        "ring_selection",
        steps=[{"ring": "IRing", "n": 1_281_167, "ratio": 1.3}, {"ring": "MoCoRing", "n": 65_536, "ratio": 1.2}],
    )
    result("ring_selection_quick", steps=[{"ring": "IRing", "n": 1_281_167, "ratio": 1.1}])  # --quick: replaces it
    result("jpeg_decode", image_size=224, views_per_s={"device": 6500.0, "decode_only": 30_000.0})
    result("sync_step", methods={"MoCo": {"status": "pass"}, "IR": {"status": "fail", "error": "called a sync"}})
    stored = json.loads((suite_summary.COMMITTED / "store_loader-NVIDIA_H200.json").read_text())  # the price reads it
    stored.pop("machine")
    result("store_loader", **stored)
    result("decode_pixels", max_abs_diff=3, mean_abs_diff=0.6)  # within the largest difference, over the mean's
    result("stream_sanitizer", status="pass", runs={})
    rows = {r["id"]: r for r in suite_summary.summarize(tmp_path, "quick", [])["targets"]}
    assert {
        k: rows[k]["status"]
        for k in (
            "moco_compiled",
            "pipeline_MoCo_compile",
            "jpeg_path",
            "iring_ratio",
            "mocoring_ratio",
            "moco_eager",
            "sync_step_MoCo",
            "sync_step_IR",
            "store_MoCo_compile",
            "store_IR_compile",
            "store_gpu_MoCo_compile",
            "store_gpu_IR_compile",
            "store_gpu_pixels",
            "store_gpu_pixels_mean",
            "stream_sanitizer",
        )
    } == {
        "moco_compiled": "fail",
        "pipeline_MoCo_compile": "pass",
        "jpeg_path": "pass",
        "iring_ratio": "pass",
        "mocoring_ratio": "fail",
        "moco_eager": "not run",
        "sync_step_MoCo": "pass",
        "sync_step_IR": "fail",
        "store_MoCo_compile": "pass",  # 8,000 / 8,500 >= 0.9
        "store_IR_compile": "not run",
        "store_gpu_MoCo_compile": "fail",  # 7,000 / 8,500 < 0.9
        "store_gpu_IR_compile": "not run",
        "store_gpu_pixels": "pass",  # 3 <= 6 levels
        "store_gpu_pixels_mean": "fail",  # 0.6 > 0.5 levels
        "stream_sanitizer": "pass",
    }
    assert rows["pipeline_MoCo_compile"]["measured"] == pytest.approx(8500 / 9000)
    # Priced from the committed H200 figures with this run's files in their place; H200's bound is 550 hours (issue 39).
    assert rows["estimate_paper"]["target"] == "<= 550 GPU-hours" and rows["estimate_paper"]["measured"] > 0
    # A quick run alone: its IRing row goes into the committed ratios (MoCoRing's kept), so the grid is still priced.
    (tmp_path / "ring_selection-NVIDIA_H200.json").unlink()
    rows = {r["id"]: r for r in suite_summary.summarize(tmp_path, "quick", [])["targets"]}
    assert rows["iring_ratio"]["measured"] == 1.1 and rows["estimate_paper"]["status"] in ("pass", "fail")


@pytest.mark.slow  # two tiny IR builds: ~15 s alone, more on a loaded CPU
def test_jpeg_decode_writes_photo_like_files_of_imagenet_s_size(tmp_path):
    """ImageNet's JPEGs are about 110 KB at about 400 x 350 px; the benchmark's smooth 24.5 KB files flattered decoding.
    48 files (seed 0): sizes spread about 27 KB, so the mean's standard error is about 4 KB, the bounds 5 of them
    away."""
    from PIL import Image

    from benchmarks import jpeg_decode

    mean_kb = jpeg_decode.make_jpegs(tmp_path, 48)
    files = sorted((tmp_path / "class0").iterdir())
    assert len(files) == 48 and mean_kb == pytest.approx(sum(f.stat().st_size for f in files) / 48 / 1e3)
    assert 90 <= mean_kb <= 130
    sides = [Image.open(f).size for f in files]
    assert all(300 <= w <= 500 and 250 <= h <= 450 for w, h in sides)


def test_sync_step_runs_one_step_under_the_sync_debug_mode_and_records_a_sync(monkeypatch):
    """The CUDA step's code on the CPU, torch's mode setter replaced by one that records (it initialises CUDA)."""
    import torch

    from benchmarks import sync_step

    modes = []
    assert sync_step.one_method("IR", True, torch.device("cpu"), modes.append) == {"status": "pass"}
    assert modes == ["error", "default"]  # the timed step ran under "error", and the mode is restored

    class HostReadingFlags:  # what the mode raises on a host read, here only under "error"
        def __init__(self, count: int):
            self.count = count

        def __call__(self, *flags):
            if modes[-1] == "error":
                raise RuntimeError("called a synchronizing CUDA operation\nmore")
            return flags

    monkeypatch.setattr(sync_step.distributed, "StepFlags", HostReadingFlags)
    result = sync_step.one_method("IR", True, torch.device("cpu"), modes.append)
    assert result["status"] == "fail" and result["error"] == "called a synchronizing CUDA operation"
    assert "__call__" in result["where"] and modes[-1] == "default"


def test_suite_summary_names_each_missing_package(monkeypatch, capsys):
    monkeypatch.setitem(suite_summary.PACKAGES, "no_such_module_xyz", "no-such-dist")
    assert suite_summary.main(["check"]) == 1
    assert capsys.readouterr().out.splitlines() == [
        "suite: missing python package 'no_such_module_xyz' (pip install no-such-dist)"
    ]


def _archive(path: Path, members: dict[str, bytes], link: str | None = None) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if link:
            info = tarfile.TarInfo(link)
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
            tar.addfile(info)
    return path


@pytest.mark.parametrize(
    "bad",
    [{"/abs/x-cpu.json": b"{}"}, {"../x-cpu.json": b"{}"}, {"logs/../../x.log": b""}, {"run.py": b"print()"}, "link"],
    ids=["absolute", "dotdot", "nested_dotdot", "suffix", "symlink"],
)
def test_unpack_refuses_an_archive_with_an_unsafe_member(tmp_path, bad):
    members = {"throughput_IR-GPU_X.json": b"{}"}
    archive = _archive(
        tmp_path / "r.tar.gz",
        {**members, **bad} if isinstance(bad, dict) else members,
        link="evil-GPU_X.json" if bad == "link" else None,
    )
    with pytest.raises(ValueError, match="refusing to unpack this archive"):
        suite_summary.unpack(archive, tmp_path / "dest")
    assert not (tmp_path / "dest").exists()  # nothing written before every member is checked


def test_unpack_writes_the_results_only(tmp_path):
    archive = _archive(
        tmp_path / "r.tar.gz",
        {
            "throughput_IR-GPU_X.json": b'{"a": 1}',
            "suite.json": b"{}",
            "logs/throughput_IR.log": b"log",
            "logs/nvidia-smi.txt": b"smi",
        },
    )
    written = suite_summary.unpack(archive, tmp_path / "dest")
    assert written == [tmp_path / "dest" / "throughput_IR-GPU_X.json"]
    assert sorted(p.name for p in (tmp_path / "dest").iterdir()) == ["throughput_IR-GPU_X.json"]


@pytest.mark.slow
def test_store_check_benchmark_times_the_check_cold_and_from_its_record():
    """benchmarks/store_check.py at --tiny size: the check a cell runs at its start, every file hashed and from
    checked.json, and the full check; the record's check reads no shard, so it takes a fraction of the cold one."""
    result = run_tiny("store_check")
    seconds = result["seconds"]
    assert result["images"] == 132 and result["shards"] == 2 and result["store_bytes"] > 0
    assert 0 < seconds["warm_s"] < seconds["cold_s"] and seconds["warm_s"] < seconds["every_image_s"]
    assert result["hash_mb_per_s"] > 0 and result["imagenet_estimate_s"]["warm"] < result["imagenet_estimate_s"]["cold"]


@pytest.mark.slow
def test_orchestration_benchmark_plans_the_paper_grid():
    result = run_tiny("orchestration")
    assert result["jobs_planned"] > 2 * 84


@pytest.mark.parametrize(
    "name",
    [
        "ring_selection",
        "ring_radix",
        "ring_partition",
        "kmeans_assign",
        "view_draws",
        "data_pipeline",
        "orchestration",
        "quickstart",
        "throughput_IR",
        "throughput_MoCo",
        "throughput_CMC",
        "throughput_LA",
        "jpeg_decode",
        "price",
        "price_check",
        "store_check",
        "eval_input",
    ],
)
def test_committed_results_exist(name):
    assert list((ROOT / "ring" / "resources" / "figures").glob(f"{name}-*.json")), (
        f"run benchmarks/{name} and commit its result"
    )


def test_toy_protocols_benchmark_summarises_both_protocols_and_readings():
    subprocess.run(
        [sys.executable, "benchmarks/toy_protocols.py", "--tiny", "--seeds", "0", "1"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    result = json.loads((ROOT / "ring" / "resources" / "figures" / ".tiny-toy_protocols.json").read_text())
    assert [r["seed"] for r in result["per_seed"]] == [0, 1]
    summary = result["summary"]
    for protocol in ("nce_critic", "own_critics", "nce_critic_train", "own_critics_train"):
        ours, literal = (
            summary[f"{protocol} | {reading}"]
            for reading in ("closest (100 - w_l)% (main text, ours)", "closest w_l% (appendix, literal)")
        )
        # the literal reading's w_l = p is our percentage 100 - p, the same measured numbers
        assert ours["CNCE10"]["ours_key"] == "CNCE10" and literal["CNCE10"]["ours_key"] == "CNCE90"
        assert literal["CNCE10"]["mean"] == ours["CNCE90"]["mean"]
    assert list((ROOT / "ring" / "resources" / "figures").glob("toy_protocols-*.json"))


@pytest.mark.slow
def test_throughput_reads_the_store_and_states_why_the_gpu_decoder_feed_is_skipped_on_a_cpu():
    subprocess.run(
        [sys.executable, "benchmarks/throughput.py", "--method", "IR", "--feeds", "store,store_gpu", "--tiny"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=600,
    )
    result = json.loads((ROOT / "ring" / "resources" / "figures" / ".tiny-throughput_IR.json").read_text())
    assert set(result["images_per_s"]) == {"store"} and result["images_per_s"]["store"] > 0
    assert result["skipped_feeds"]["store_gpu"].startswith("no CUDA device: the GPU's JPEG decoder needs one")
    assert result["ratio_store_gpu_to_device"] is None and result["store_timed_steps"] >= 2


def test_the_performance_page_holds_the_price_section_generated_from_the_committed_files():
    """docs/performance.md's measured price (issue 47, item 5) is ``python -m benchmarks.price --docs``'s output: the
    end-to-end figures, the fixed costs, the held-out grid's predicted against spent, and the paper grid's blocks."""
    from benchmarks import price_docs

    figures = ROOT / "ring" / "resources" / "figures"
    section = price_docs.section(figures / "price-cpu.json", figures / "price_check-cpu.json")
    page = (ROOT / "docs" / "performance.md").read_text()
    stated = page[page.index(price_docs.BEGIN) : page.index(price_docs.END) + len(price_docs.END)]
    assert stated == section, "run python -m benchmarks.price --docs and put its output in docs/performance.md"


def test_the_committed_cpu_figures_were_timed_past_the_prefetch_and_price_the_held_out_grid_end_to_end():
    """Every committed end-to-end figure passes the writer's checks (timed past workers x prefetch_factor + warm-up
    batches), and every row of the held-out grid's check was priced from them, none by the component model."""
    from ring.plan.estimate import measured

    figures = ROOT / "ring" / "resources" / "figures"
    price = json.loads((figures / "price-cpu.json").read_text())
    for fig in price["passes"]:
        measured.check_written(fig)
        assert fig["excluded_batches"] >= fig["record"]["workers"] * fig["record"]["prefetch_factor"] + 1
    check = json.loads((figures / "price_check-cpu.json").read_text())
    assert check["sources"] and all(s == ["end-to-end (price-cpu.json)"] for s in check["sources"].values())
    assert set(check["rows"]) == {"pretraining", "linear evaluation", "fixed costs"}


def test_every_block_of_the_paper_grid_is_priced_detection_from_the_committed_detection_figures():
    """Issue 47, item 2: no block of the paper grid is left out of its total: detection from the CPU's end-to-end
    Detectron2 figures at the stated ratio to the GPU, MS-COCO's transfer cells at their crops' caps."""
    from ring import resources
    from ring.plan import grid
    from ring.plan.estimate import blocks, load_figures

    priced = blocks.price_grid(grid.load(resources.GRIDS / "paper.yaml"), load_figures())
    assert not any(block["unpriced"] for block in priced.values()), {k: b["unpriced"] for k, b in priced.items()}
    detection = priced["detection"]
    assert detection["seconds"] > 0 and set(detection["sources"]) == {"detection", "fixed costs"}
    assert all("price_detection-cpu.json" in source for source in detection["sources"]["detection"])
    assert all("the ratio of their ResNet-18 training steps" in source for source in detection["sources"]["detection"])
