"""Fetch datasets from their publishers into the layout the data check (:mod:`ring.data.folders`) expects; the
command, ``ring fetch`` (by name or a grid's), is :mod:`ring.fetch`.

Meant for a login node with internet. Every download comes from the publisher's URL (torchvision's own url/md5 class
attributes where torchvision has a downloader), goes to ``<data_root>/.downloads/<host>/<path>`` (a partial file
``*.part`` is resumed with an HTTP Range request, by a retry or by the next run), is checked against the publisher's
md5, then unpacked into ``<data_root>/<name>/`` (detection: the Detectron2 folder), and the result must pass the data
check. ``--mirror URL`` fetches ``URL/<host>/<path>`` instead: the layout ``wget --mirror`` produces, and that
``<data_root>/.downloads`` itself has, so one site's download folder can serve another.

Stamp: a fetched dataset's folder gets ``.ring-fetch.json`` (written last, atomically)::

    {"format": 1, "dataset": NAME, "folder": PATH, "fetched_at": ISO-8601 UTC,
     "files": [{"url": URL fetched, "file": path below .downloads, "bytes": N,
                "publisher_md5": MD5 or null (the publisher publishes none), "md5": MD5, "sha256": SHA256}],
     "fingerprint": ring.data.folders.fingerprint of the unpacked files (sizes and times; not for detection)}

It means: these archives, with these checksums, were unpacked here and the data check passed. A dataset with a stamp
whose folder still passes the check, unchanged since, is not fetched again; the data check trusts it instead of hashing
the files (:func:`ring.data.folders.fetched_from_publisher`).
"""

from __future__ import annotations

import errno
import gzip
import hashlib
import http.client
import json
import os
import shutil
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from urllib.error import HTTPError, URLError
from urllib.parse import urlsplit
from urllib.request import Request, urlopen

from ring.core import catalog
from ring.data import folders

STAMP = catalog.FETCH_STAMP
STAMP_FORMAT = 1
DOWNLOADS = ".downloads"
CHUNK = 1 << 20
RETRIES = 3  # per URL; each retry resumes where the connection dropped
TIMEOUT_S = 60


class FetchError(RuntimeError):
    """A dataset could not be fetched; the message is one sentence saying why and what to do."""


@dataclass(frozen=True)
class Download:
    urls: tuple[str, ...]  # the publisher's URL first (its path is the mirror path), then its own mirrors
    md5: str | None  # the publisher's checksum; None: it publishes none (the stamp records sha256)
    unpack: str = "extract"  # "extract" an archive, "gunzip" one file, or "copy" it as is
    strip: str = ""  # a leading folder of the archive's members that the layout does not have

    @property
    def mirror_path(self) -> str:
        parts = urlsplit(self.urls[0])
        return parts.netloc + parts.path

    @property
    def filename(self) -> str:
        return Path(urlsplit(self.urls[0]).path).name


@dataclass(frozen=True)
class Recipe:
    downloads: tuple[Download, ...]
    into: str = ""  # below the dataset folder
    detection: bool = False  # unpacked below the Detectron2 folder, checked against `required`
    required: tuple[str, ...] = ()


def _torchvision():
    import torchvision.datasets as D  # imported here: the catalog and the workflow client stay torch-free
    from torchvision.datasets import imagenet, voc

    return D, voc, imagenet


def _idx(cls) -> Recipe:
    """MNIST / FashionMNIST: torchvision's mirrors and per-file md5s, gunzipped into <cls>/raw like torchvision."""
    return Recipe(
        tuple(Download(tuple(m + f for m in cls.mirrors), md5, "gunzip") for f, md5 in cls.resources),
        into=f"{cls.__name__}/raw",
    )


def _voc_year(voc, *years: str) -> Recipe:
    """Pascal VOC of ``years`` (torchvision's URLs and md5s), in Detectron2's layout."""
    base = voc.DATASET_YEAR_DICT[years[0]]["base_dir"]  # VOCdevkit/VOC2007
    return Recipe(
        tuple(Download((voc.DATASET_YEAR_DICT[y]["url"],), voc.DATASET_YEAR_DICT[y]["md5"], strip=base) for y in years),
        detection=True,
        required=(
            "Annotations",
            "JPEGImages",
            *(f"ImageSets/Main/{s}.txt" for s in (("trainval", "test") if "2007-test" in years else ("trainval",))),
        ),
    )


def _torchvision_recipes(D) -> dict[str, Recipe]:
    """The datasets whose URLs and md5s torchvision's classes hold."""
    flowers = D.Flowers102
    return {
        "cifar10": Recipe((Download((D.CIFAR10.url,), D.CIFAR10.tgz_md5),)),
        "cifar100": Recipe((Download((D.CIFAR100.url,), D.CIFAR100.tgz_md5),)),
        "stl10": Recipe((Download((D.STL10.url,), D.STL10.tgz_md5),)),
        "mnist": _idx(D.MNIST),
        "fashion_mnist": _idx(D.FashionMNIST),
        # torchvision's DTD extracts into <root>/dtd, the archive holds dtd/.
        "dtd": Recipe((Download((D.DTD._URL,), D.DTD._MD5),), into="dtd"),
        # The publisher (and torchvision) give no checksum for FGVC-Aircraft: the stamp records its sha256.
        "aircraft": Recipe((Download((D.FGVCAircraft._URL,), None),)),
        "vgg_flower": Recipe(
            tuple(
                Download((flowers._download_url_prefix + f,), md5, "extract" if f.endswith("tgz") else "copy")
                for f, md5 in flowers._file_dict.values()
            ),
            into="flowers-102",
        ),
    }


# torchvision's GTSRB keeps its URLs and md5s inside GTSRB.download(), not in attributes.
GTSRB = "https://sid.erda.dk/public/archives/daaeac0d7ce1152aea9b61d9f1e19370/"
# The FGVCx 2018 page (github.com/visipedia/fgvcx_fungi_comp) publishes the fungi md5s; its labs.gbif.org links
# moved, Meta-Dataset's instructions point at a copy on data.deic.dk.
DEIC = "https://data.deic.dk/public.php?service=files&t={}&download"
FUNGI = "https://labs.gbif.org/fgvcx/2018/"
COCO = "http://images.cocodataset.org/"


def _publisher_recipes() -> dict[str, Recipe]:
    """The datasets whose URLs and md5s come from their publishers' pages (torchvision has none)."""
    return {
        "traffic_sign": Recipe(
            (
                Download((GTSRB + "GTSRB-Training_fixed.zip",), "513f3c79a4c5141765e10e952eaa2478"),
                Download((GTSRB + "GTSRB_Final_Test_Images.zip",), "c7e4e6327067d32654124b0fe9e82185"),
                Download((GTSRB + "GTSRB_Final_Test_GT.zip",), "fe31e9c9270bbcd7b84b7f21a9d9d9e5"),
            ),
            into="gtsrb",
        ),
        # CaltechDATA's record lists the archive's md5.
        "cub": Recipe(
            (
                Download(
                    ("https://data.caltech.edu/records/65de6-vzc43/files/CUB_200_2011.tgz?download=1",),
                    "97eceeb196236b17998738112f37df78",
                ),
            )
        ),
        "fungi": Recipe(
            (
                Download(
                    (FUNGI + "fungi_train_val.tgz", DEIC.format("2fd47962a38e2a70570f3be027cea57f")),
                    "df2b2980835668ed1d9a0e286e4bdadd",
                ),
                Download(
                    (FUNGI + "train_val_annotations.tgz", DEIC.format("8dc110f312677d2b53003de983b3a26e")),
                    "c3c0f1b8a8d0b60619c43d9c89bdbc7e",
                ),
            )
        ),
    }


def _coco_recipes() -> dict[str, Recipe]:
    """COCO 2017: the transfer column's crops (mscoco) and Detectron2's layout (coco) from the same archives."""
    # COCO publishes no checksums; these md5s are the ones other downloaders verify (PaddleDetection, ...).
    zips = (
        Download((COCO + "zips/train2017.zip",), "cced6f7f71b7629ddf16f17bbcfab6b2"),
        Download((COCO + "zips/val2017.zip",), "442b8da7639aecaf257c1dceb8ba8c80"),
        Download((COCO + "annotations/annotations_trainval2017.zip",), "f4bbac642086de4f52a3fdda2de5fa2c"),
    )
    annotations = tuple(
        f"annotations/{k}_{s}2017.json" for k in ("instances", "person_keypoints") for s in ("train", "val")
    )
    # Detectron2's layout (README "Detection"), below $DETECTRON2_DATASETS or <data_root>/detectron2.
    return {
        "mscoco": Recipe(zips),
        "coco": Recipe(zips, detection=True, required=(*annotations, "train2017", "val2017")),
    }


def recipes() -> dict[str, Recipe]:
    """Every automatically fetchable target.  URLs and md5s come from torchvision's class attributes
    where it has them, so they are not duplicated here."""
    D, voc, _ = _torchvision()
    return {
        **_torchvision_recipes(D),
        **_publisher_recipes(),
        **_coco_recipes(),
        "voc2007": _voc_year(voc, "2007", "2007-test"),
        "voc2012": _voc_year(voc, "2012"),
    }


DETECTION_FOLDERS = {"coco": "coco", "voc2007": "VOC2007", "voc2012": "VOC2012"}  # below the Detectron2 folder


def by_hand(name: str, data_root: Path) -> str | None:
    """One sentence for a dataset that cannot be fetched automatically (None: it can, or needs nothing)."""
    if name == "imagenet":
        _, _, imagenet = _torchvision()
        md5s = ", ".join(f"{f} {m}" for f, m in imagenet.ARCHIVE_META.values())
        return f"ImageNet needs an account, so it is fetched by hand: {catalog.hint(name, data_root)} (md5s: {md5s})."
    return None


def folder(name: str, data_root: Path, detectron2_root: Path) -> Path:
    if name in DETECTION_FOLDERS:
        return detectron2_root / DETECTION_FOLDERS[name]
    return catalog.folder(name, data_root)


# -- downloading -------------------------------------------------------------------------------


def source_urls(dl: Download, mirror: str | None) -> list[str]:
    """Where to fetch ``dl``: the mirror's copy at the publisher's host/path, else the publisher's URLs."""
    return [f"{mirror.rstrip('/')}/{dl.mirror_path}"] if mirror else list(dl.urls)


def _disk_error(err: OSError, path: Path) -> FetchError | None:
    if err.errno == errno.ENOSPC:
        return FetchError(
            f"No space left on the device while writing {path}; free space (or pick another --data-root) "
            "and rerun, which resumes where it stopped."
        )
    if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return FetchError(
            f"Cannot write {path} ({err.strerror}); make the data root writable or pick another --data-root."
        )
    return None


def _append(fh, chunk: bytes) -> None:
    fh.write(chunk)  # one place where downloaded bytes reach the disk (the tests fill it up here)


def _get(url: str, part: Path, progress) -> None:
    """Append ``url``'s bytes to ``part``, from the byte it already holds (HTTP Range)."""
    have = part.stat().st_size if part.exists() else 0
    headers = {"User-Agent": "ring-bench-fetch"}
    if have:
        headers["Range"] = f"bytes={have}-"
    try:
        resp = urlopen(Request(url, headers=headers), timeout=TIMEOUT_S)
    except HTTPError as err:
        if err.code == 416 and have:  # Range not satisfiable: the part is already whole; the checksum decides
            return
        raise
    with resp:
        if have and resp.status != 206:  # the server ignored the Range: start over
            have = 0
        length = resp.headers.get("Content-Length")
        total = have + int(length) if length is not None else None
        progress.reset(total=total)
        progress.update(have)
        with open(part, "ab" if have else "wb") as fh:
            while chunk := resp.read(CHUNK):
                _append(fh, chunk)
                progress.update(len(chunk))
        if total is not None and part.stat().st_size < total:
            raise http.client.IncompleteRead(b"", total - part.stat().st_size)


def download(dl: Download, downloads: Path, mirror: str | None) -> tuple[Path, str]:
    """The verified file of ``dl`` below ``downloads`` and the URL it came from."""
    from tqdm import tqdm

    dest = downloads / dl.mirror_path
    part = dest.with_name(dest.name + ".part")
    urls = source_urls(dl, mirror)
    if dest.exists():
        return dest, urls[0]
    dest.parent.mkdir(parents=True, exist_ok=True)
    last = None
    for url in urls:
        for _ in range(RETRIES + 1):
            try:
                with tqdm(desc=dl.filename, unit="B", unit_scale=True, leave=False, file=sys.stderr) as progress:
                    _get(url, part, progress)
                os.replace(part, dest)
                return dest, url
            except HTTPError as err:
                last = err
                break  # the next URL; retrying the same answer is useless
            except (URLError, ConnectionError, http.client.HTTPException, TimeoutError) as err:
                last = err  # dropped mid-file: the next try resumes from the part
            except OSError as err:
                raise (_disk_error(err, part) or err) from None
    have = part.stat().st_size if part.exists() else 0
    raise FetchError(
        f"Could not download {dl.filename} from {', '.join(urls)} ({last}); rerun to resume from byte {have}, "
        "or use --mirror."
    )


def checksums(path: Path) -> tuple[str, str]:
    md5, sha = hashlib.md5(), hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            md5.update(chunk)
            sha.update(chunk)
    return md5.hexdigest(), sha.hexdigest()


def verify(dl: Download, path: Path, url: str) -> dict:
    md5, sha = checksums(path)
    if dl.md5 is not None and md5 != dl.md5:
        path.unlink()  # a wrong file is no result: the next run downloads it again
        raise FetchError(
            f"{dl.filename} from {url} has md5 {md5}, not the publisher's {dl.md5}, so that server serves "
            "different bytes; it was deleted: fix the mirror (or drop --mirror) and rerun."
        )
    return {
        "url": url,
        "file": dl.mirror_path,
        "bytes": path.stat().st_size,
        "publisher_md5": dl.md5,
        "md5": md5,
        "sha256": sha,
    }


# -- unpacking ---------------------------------------------------------------------------------


def _merge(src: Path, dst: Path) -> None:
    """Move ``src``'s contents into ``dst``; folders merge (VOC's trainval and test share VOC2007/)."""
    dst.mkdir(parents=True, exist_ok=True)
    for item in src.iterdir():
        target = dst / item.name
        if item.is_dir() and target.is_dir():
            _merge(item, target)
        else:
            if target.is_dir():
                shutil.rmtree(target)
            os.replace(item, target)


def unpack(dl: Download, archive: Path, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    if dl.unpack == "gunzip":
        out = dest / archive.name.removesuffix(".gz")
        with gzip.open(archive) as src, tempfile.NamedTemporaryFile(dir=dest, delete=False) as tmp:
            shutil.copyfileobj(src, tmp, CHUNK)
        os.replace(tmp.name, out)
        return
    if dl.unpack == "copy":
        with tempfile.NamedTemporaryFile(dir=dest, delete=False) as tmp:
            shutil.copyfile(archive, tmp.name)
        os.replace(tmp.name, dest / archive.name)
        return
    staging = Path(tempfile.mkdtemp(prefix=".unpack-", dir=dest))  # same file system: the moves are renames
    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as zf:
                zf.extractall(staging)
        else:
            with tarfile.open(archive) as tf:
                tf.extractall(staging, filter="data")  # no absolute paths or links out of the folder
        top = staging / dl.strip
        if not top.is_dir():
            raise FetchError(
                f"{archive.name} has no {dl.strip}/ folder, unlike the publisher's archive; delete {archive} "
                "and rerun, or check the mirror."
            )
        _merge(top, dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


# -- one dataset -------------------------------------------------------------------------------


def check_layout(name: str, recipe: Recipe, base: Path, data_root: Path) -> None:
    if recipe.detection:
        missing = [r for r in recipe.required if not (base / r).exists()]
        if missing:
            raise catalog.DatasetMissing(f"{name} is missing {base / missing[0]}")
    else:
        folders.check(name, data_root)


def stamp_ok(name: str, recipe: Recipe, base: Path, data_root: Path) -> bool:
    """The folder still holds what this stamp's fetch unpacked: a catalog dataset's files unchanged since
    (so a dataset the data check finds damaged is unpacked again, not called fetched), and the layout."""
    try:
        stamp = json.loads((base / STAMP).read_text())
        check_layout(name, recipe, base, data_root)
    except (OSError, ValueError, catalog.DatasetMissing):
        return False
    unchanged = recipe.detection or stamp.get("fingerprint") == folders.fingerprint(name, data_root)
    return stamp.get("format") == STAMP_FORMAT and stamp.get("dataset") == name and unchanged


def _writable(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write-test-", dir=path)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise FetchError(
            f"Data root {path} is not writable ({err.strerror or err}); pick a writable --data-root "
            "or fix its permissions."
        ) from None


def fetch(
    name: str, data_root: str | Path, mirror: str | None = None, detectron2_root: str | Path | None = None
) -> str:
    """Fetch ``name`` (see :func:`recipes`); returns one line saying what was done."""
    data_root = Path(data_root)
    det_root = Path(detectron2_root) if detectron2_root else data_root / "detectron2"
    table = recipes()
    if name not in table:
        hand = by_hand(name, data_root)
        if hand:
            raise FetchError(hand)
        if name in catalog.DATASETS or name in catalog.TRANSFER:  # embedded: nothing to download
            return f"{name}: nothing to fetch ({catalog.hint(name, data_root)})"
        raise FetchError(f"Unknown dataset {name!r}; choose from {', '.join(sorted({*table, 'imagenet'}))}.")
    recipe = table[name]
    base = folder(name, data_root, det_root)
    if stamp_ok(name, recipe, base, data_root):
        return f"{name}: already fetched and verified in {base}"
    _writable(data_root)
    _writable(base)
    downloads = data_root / DOWNLOADS
    files = []
    try:
        for dl in recipe.downloads:
            path, url = download(dl, downloads, mirror)
            files.append(verify(dl, path, url))
        for dl in recipe.downloads:
            unpack(dl, downloads / dl.mirror_path, base / recipe.into)
        try:
            check_layout(name, recipe, base, data_root)
        except catalog.DatasetMissing as err:
            raise FetchError(
                f"The archives of {name} ({', '.join(d.filename for d in recipe.downloads)}) unpacked without "
                f"the layout the data check expects ({str(err).split(';')[0]}); the publisher may have changed "
                "them, so check the mirror or report it."
            ) from None
        stamp = {
            "format": STAMP_FORMAT,
            "dataset": name,
            "folder": str(base),
            "fetched_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "files": files,
        }
        if not recipe.detection:  # what the data check compares before it trusts the stamp
            stamp["fingerprint"] = folders.fingerprint(name, data_root)
        with tempfile.NamedTemporaryFile("w", dir=base, delete=False, suffix=".tmp") as tmp:
            json.dump(stamp, tmp, indent=1)
        os.replace(tmp.name, base / STAMP)
    except OSError as err:
        raise (_disk_error(err, Path(err.filename or base)) or err) from None
    return f"{name}: fetched, verified and unpacked into {base}"
