"""ring.data.download against a loopback HTTP server (127.0.0.1, a random port) that serves tiny archives in
each publisher's format at the publisher's host/path, reached through --mirror: the same code path
as a real fetch, and nothing leaves the machine."""

import dataclasses
import errno
import gzip
import hashlib
import io
import json
import os
import shutil
import tarfile
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ring import cli
from ring.data import download, fetch_recipes, folders
from tests.data.test_metadataset import WRITERS, _image, _text
from tests.helpers import copy_workflow
from tests.workflow.runs import snakemake


class _Handler(BaseHTTPRequestHandler):
    """GET with Range; ``drop[path] = n`` sends the full length header but closes after n bytes, once."""

    def do_GET(self):
        srv = self.server
        srv.requests.append((self.path, self.headers.get("Range")))
        body = srv.files.get(self.path)
        if body is None:
            self.send_error(404)
            return
        start = int(self.headers["Range"].split("=")[1].split("-")[0]) if self.headers.get("Range") else 0
        if start >= len(body):
            self.send_error(416)
            return
        self.send_response(206 if start else 200)
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        self.send_header("Content-Length", str(len(body) - start))
        self.end_headers()
        cut = srv.drop.pop(self.path, None)
        self.wfile.write(body[start:] if cut is None else body[start : start + cut])

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.files, srv.drop, srv.requests = {}, {}, []
    srv.url = f"http://127.0.0.1:{srv.server_address[1]}"
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


# -- archives in each publisher's format, built from the loader tests' tiny trees --------------


def _tar(base: Path, members, prefix: str = "") -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tf:
        for m in members:
            tf.add(base / m, arcname=prefix + m)
    return out.getvalue()


def _zip(base: Path, members) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        for m in members:
            for path in [base / m, *sorted((base / m).rglob("*"))]:
                zf.write(path, path.relative_to(base).as_posix())
    return out.getvalue()


def _cifar10(src: Path) -> None:
    for f in [*(f"data_batch_{i}" for i in range(1, 6)), "test_batch", "batches.meta"]:
        _text(src / "cifar10" / "cifar-10-batches-py" / f, ["not a pickle: the check reads file names only"])


def _voc2007(src: Path) -> None:
    base = src / "voc2007" / "VOCdevkit" / "VOC2007"
    for split, ids in (("trainval", ["000005"]), ("test", ["000001"])):
        _text(base / "ImageSets" / "Main" / f"{split}.txt", ids)
        for i in ids:
            _text(base / "Annotations" / f"{i}.xml", [f"<annotation><filename>{i}.jpg</filename></annotation>"])
            _image(base / "JPEGImages" / f"{i}.jpg")


TREES = {**WRITERS, "cifar10": _cifar10, "voc2007": _voc2007}

# Each publisher archive's members, relative to <tree>/<name>/<recipe.into> (VOC: the tree's VOCdevkit root).
ARCHIVES = {
    "cifar10": {"cifar-10-python.tar.gz": ("tar", ["cifar-10-batches-py"])},
    "aircraft": {"fgvc-aircraft-2013b.tar.gz": ("tar", ["fgvc-aircraft-2013b"])},
    "cub": {"CUB_200_2011.tgz": ("tar", ["CUB_200_2011"])},
    "dtd": {"dtd-r1.0.1.tar.gz": ("tar", ["dtd"])},
    "fungi": {
        "fungi_train_val.tgz": ("tar", ["images"]),
        "train_val_annotations.tgz": ("tar", ["train.json", "val.json"]),
    },
    "traffic_sign": {
        "GTSRB-Training_fixed.zip": ("zip", ["GTSRB/Training"]),
        "GTSRB_Final_Test_Images.zip": ("zip", ["GTSRB/Final_Test"]),
        "GTSRB_Final_Test_GT.zip": ("zip", ["GT-final_test.csv"]),
    },
    "vgg_flower": {"102flowers.tgz": ("tar", ["jpg"])},  # the two .mat files are served as they are
    "mscoco": {
        "train2017.zip": ("zip", ["train2017"]),
        "val2017.zip": ("zip", ["val2017"]),
        "annotations_trainval2017.zip": ("zip", ["annotations"]),
    },
    "voc2007": {
        "VOCtrainval_06-Nov-2007.tar": (
            "tar",
            [
                "VOCdevkit/VOC2007/Annotations/000005.xml",
                "VOCdevkit/VOC2007/JPEGImages/000005.jpg",
                "VOCdevkit/VOC2007/ImageSets/Main/trainval.txt",
            ],
        ),
        "VOCtest_06-Nov-2007.tar": (
            "tar",
            [
                "VOCdevkit/VOC2007/Annotations/000001.xml",
                "VOCdevkit/VOC2007/JPEGImages/000001.jpg",
                "VOCdevkit/VOC2007/ImageSets/Main/test.txt",
            ],
        ),
    },
}


def publish(server, tmp_path: Path, name: str, monkeypatch, *, tamper=None) -> fetch_recipes.Recipe:
    """Serve ``name``'s archives at /<publisher host>/<path>; the recipe's md5s become theirs (None stays None).
    ``tamper(filename, bytes) -> bytes`` changes what is served after the md5 is taken."""
    src = tmp_path / "publisher"
    TREES[name](src)
    recipe = fetch_recipes.recipes()[name]
    base = src / name / (recipe.into if not recipe.detection else "")
    downloads = []
    for dl in recipe.downloads:
        kind, members = ARCHIVES.get(name, {}).get(dl.filename, ("file", None))
        if kind == "tar":
            body = _tar(base, members)
        elif kind == "zip":
            body = _zip(base, members)
        elif dl.unpack == "gunzip":
            body = gzip.compress((base / dl.filename.removesuffix(".gz")).read_bytes(), mtime=0)
        else:
            body = (base / dl.filename).read_bytes()
        md5 = hashlib.md5(body).hexdigest() if dl.md5 else None
        server.files["/" + dl.mirror_path] = tamper(dl.filename, body) if tamper else body
        downloads.append(dataclasses.replace(dl, md5=md5))
    recipe = dataclasses.replace(recipe, downloads=tuple(downloads))
    table = {**fetch_recipes.recipes(), name: recipe}
    monkeypatch.setattr(fetch_recipes, "recipes", lambda: table)
    return recipe


@pytest.mark.parametrize(
    "name", ["cifar10", "mnist", "aircraft", "cub", "dtd", "fungi", "traffic_sign", "vgg_flower", "mscoco", "voc2007"]
)
def test_fetch_unpacks_each_publishers_archives_into_the_checked_layout(server, tmp_path, monkeypatch, name, capsys):
    recipe = publish(server, tmp_path, name, monkeypatch)
    data = tmp_path / "data"
    assert cli.main(["fetch", name, "--data-root", str(data), "--mirror", server.url + "/"]) == 0
    assert "fetched, verified and unpacked" in capsys.readouterr().out
    base = fetch_recipes.folder(name, data, data / "detectron2")
    download.check_layout(name, recipe, base, data)
    stamp = json.loads((base / download.STAMP).read_text())
    assert stamp["format"] == download.STAMP_FORMAT and stamp["dataset"] == name
    for dl, entry in zip(recipe.downloads, stamp["files"], strict=True):
        body = server.files["/" + dl.mirror_path]
        assert entry["sha256"] == hashlib.sha256(body).hexdigest() and entry["publisher_md5"] == dl.md5
        assert entry["url"] == f"{server.url}/{dl.mirror_path}"
    assert sorted(p for p, _ in server.requests) == sorted(server.files)
    # A second run trusts the stamp of a folder that still passes the check: nothing is requested.
    server.requests.clear()
    assert "already fetched" in download.fetch(name, data, server.url)
    assert server.requests == []


def test_publisher_without_checksum_gets_its_sha256_recorded(server, tmp_path, monkeypatch):
    assert fetch_recipes.recipes()["aircraft"].downloads[0].md5 is None  # the publisher gives none
    publish(server, tmp_path, "aircraft", monkeypatch)
    download.fetch("aircraft", tmp_path / "data", server.url)
    entry = json.loads((tmp_path / "data" / "aircraft" / download.STAMP).read_text())["files"][0]
    assert entry["publisher_md5"] is None and len(entry["sha256"]) == 64


def test_mirror_serving_other_bytes_fails_naming_the_file(server, tmp_path, monkeypatch):
    publish(server, tmp_path, "cub", monkeypatch, tamper=lambda f, body: body[:-1] + bytes([body[-1] ^ 1]))
    data = tmp_path / "data"
    with pytest.raises(
        download.FetchError,
        match=r"CUB_200_2011\.tgz from http://127\.0\.0\.1:\d+/data\.caltech\.edu/.* "
        r"has md5 \w+, not the publisher's",
    ):
        download.fetch("cub", data, server.url)
    assert not (data / "cub" / download.STAMP).exists()
    assert not list((data / download.DOWNLOADS).rglob("CUB_200_2011.tgz*"))  # deleted: a rerun fetches it again


def test_dropped_connection_resumes_with_a_range_request(server, tmp_path, monkeypatch):
    recipe = publish(server, tmp_path, "cub", monkeypatch)
    path = "/" + recipe.downloads[0].mirror_path
    size = len(server.files[path])
    # Within one run: the connection drops after 100 bytes, the retry asks for the rest.
    server.drop[path] = 100
    download.fetch("cub", tmp_path / "a", server.url)
    assert server.requests == [(path, None), (path, "bytes=100-")]
    # Across runs: no retries left, the run fails keeping the part; the next run resumes it.
    server.requests.clear()
    monkeypatch.setattr(download, "RETRIES", 0)
    server.drop[path] = 250
    with pytest.raises(download.FetchError, match="rerun to resume from byte 250"):
        download.fetch("cub", tmp_path / "b", server.url)
    download.fetch("cub", tmp_path / "b", server.url)
    assert server.requests == [(path, None), (path, "bytes=250-")]
    assert (tmp_path / "b" / download.DOWNLOADS / recipe.downloads[0].mirror_path).stat().st_size == size
    folders.check("cub", tmp_path / "b")


def test_archive_with_an_unexpected_layout_is_refused(server, tmp_path, monkeypatch):
    src = tmp_path / "publisher"
    publish(server, tmp_path, "cub", monkeypatch)
    (src / "cub" / "CUB_200_2011").rename(src / "cub" / "CUB_200_2011_v2")
    body = _tar(src / "cub", ["CUB_200_2011_v2"])
    recipe = fetch_recipes.recipes()["cub"]
    dl = dataclasses.replace(recipe.downloads[0], md5=hashlib.md5(body).hexdigest())
    server.files["/" + dl.mirror_path] = body
    monkeypatch.setattr(fetch_recipes, "recipes", lambda: {"cub": dataclasses.replace(recipe, downloads=(dl,))})
    with pytest.raises(
        download.FetchError, match=r"The archives of cub \(CUB_200_2011\.tgz\) unpacked without the layout"
    ):
        download.fetch("cub", tmp_path / "data", server.url)
    assert not (tmp_path / "data" / "cub" / download.STAMP).exists()


def test_full_disk_fails_with_one_sentence_and_keeps_the_part(server, tmp_path, monkeypatch):
    recipe = publish(server, tmp_path, "cub", monkeypatch)
    monkeypatch.setattr(download, "CHUNK", 64)
    written = []

    def append(fh, chunk):  # the disk fills up after 128 bytes
        if sum(written) >= 128:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        fh.write(chunk)
        written.append(len(chunk))

    monkeypatch.setattr(download, "_append", append)
    with pytest.raises(
        download.FetchError, match=r"^No space left on the device while writing .*CUB_200_2011\.tgz\.part"
    ):
        download.fetch("cub", tmp_path / "data", server.url)
    part = tmp_path / "data" / download.DOWNLOADS / (recipe.downloads[0].mirror_path + ".part")
    assert part.stat().st_size == 128
    monkeypatch.setattr(download, "_append", lambda fh, chunk: fh.write(chunk))
    download.fetch("cub", tmp_path / "data", server.url)  # space freed: the rerun resumes
    assert server.requests[-1][1] == "bytes=128-"


def test_data_root_that_is_not_writable(tmp_path, monkeypatch):
    root = tmp_path / "readonly"
    root.mkdir()
    root.chmod(0o555)
    if os.geteuid() == 0:  # root writes anyway (CI containers): the file system refuses instead

        def refuse(*args, **kwargs):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

        monkeypatch.setattr(download.tempfile, "mkstemp", refuse)
    try:
        with pytest.raises(download.FetchError, match=rf"^Data root {root} is not writable \(Permission denied\)"):
            download.fetch("cub", root, "http://127.0.0.1:9")  # never contacted: the check comes first
    finally:
        root.chmod(0o755)


def test_imagenet_and_unknown_names_get_one_sentence(tmp_path, capsys):
    assert cli.main(["fetch", "imagenet", "--data-root", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    from torchvision.datasets.imagenet import ARCHIVE_META

    assert "image-net.org" in err and "train,val}/<wnid>/*.JPEG" in err
    assert all(f"{f} {md5}" in err for f, md5 in ARCHIVE_META.values())
    assert cli.main(["fetch", "nope", "--data-root", str(tmp_path)]) == 1
    assert "Unknown dataset 'nope'" in capsys.readouterr().err
    assert "nothing to fetch" in download.fetch("digits", tmp_path)


def test_fetch_data_target_runs_the_fetch_for_the_configured_grid(tmp_path):
    copy_workflow(tmp_path)
    # The smoke grid reads only embedded data (digits, generated shapes): the rule runs and fetches nothing.
    result = snakemake(
        tmp_path,
        "--cores",
        "1",
        "-p",
        "fetch_data",
        "--config",
        f"data_root={tmp_path / 'data'}",
        "fetch_mirror=http://127.0.0.1:9",
    )
    assert "digits: nothing to fetch" in result.stdout and "shapes: nothing to fetch" in result.stdout
    assert "--mirror http://127.0.0.1:9" in result.stdout + result.stderr


# -- the data check (ring check) and fetch's stamp ----------------------------


def _check(name: str, data: Path):
    from tests.helpers import run_module

    return run_module("ring.cli", "check", name, "--data-root", data, check=False)


def test_missing_dataset_sentences_name_the_fetch_command_or_the_steps_by_hand(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    result = _check("cifar10", data)
    assert result.returncode == 1
    assert (
        f"fetch it with `ring fetch cifar10 --data-root {data}` (or every dataset of the grid with "
        "`snakemake fetch_data`) on a machine with internet, or by hand:" in result.stderr
    )
    result = _check("imagenet", data)  # behind a login: the steps by hand, no fetch command
    assert result.returncode == 1 and "ring fetch" not in result.stderr
    assert (
        f"log in at image-net.org, accept the ILSVRC2012 terms, download ILSVRC2012_img_train.tar, "
        f"ILSVRC2012_img_val.tar "
        f"and ILSVRC2012_devkit_t12.tar.gz into {data / 'imagenet'}, then run"
    ) in result.stderr


@pytest.mark.slow
def test_data_check_trusts_a_fetch_stamp_only_while_it_describes_the_folder(server, tmp_path, monkeypatch):
    # The served CIFAR10 batches are text, not the publisher's files: only a trusted stamp lets the check pass.
    publish(server, tmp_path, "cifar10", monkeypatch)
    data = tmp_path / "data"
    download.fetch("cifar10", data, server.url)
    base = data / "cifar10"
    result = _check("cifar10", data)
    assert result.returncode == 0, result.stderr
    assert "checksums verified by ring.data.download on " in result.stdout
    corrupted = "is corrupted or truncated: its md5 is"

    # A stamp for another dataset, or for the same folder somewhere else, vouches for nothing here.
    stamp = json.loads((base / download.STAMP).read_text())
    (base / download.STAMP).write_text(json.dumps({**stamp, "dataset": "cifar100"}))
    assert corrupted in _check("cifar10", data).stderr
    (base / download.STAMP).write_text(json.dumps(stamp))
    shutil.copytree(data / "cifar10", tmp_path / "copy" / "cifar10")  # copy2: sizes and times kept
    assert corrupted in _check("cifar10", tmp_path / "copy").stderr

    # A file changed since the fetch: hashed again, and named; fetching again unpacks the verified archive anew.
    batch = base / "cifar-10-batches-py" / "data_batch_1"
    with open(batch, "a") as fh:
        fh.write("appended after the fetch")
    result = _check("cifar10", data)
    assert result.returncode == 1 and f"Dataset cifar10 file {batch} {corrupted}" in result.stderr
    assert "fetched, verified and unpacked" in download.fetch("cifar10", data, server.url)
    assert _check("cifar10", data).returncode == 0


def test_a_fetch_without_the_publishers_checksum_is_still_counted(server, tmp_path, monkeypatch):
    # FGVC-Aircraft publishes no checksum: the stamp verified nothing, so the publisher's counts are compared.
    publish(server, tmp_path, "aircraft", monkeypatch)
    download.fetch("aircraft", tmp_path / "data", server.url)
    result = _check("aircraft", tmp_path / "data")
    assert result.returncode == 1 and "the publisher's release has 6667 and 3333" in result.stderr
