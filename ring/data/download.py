"""Fetch datasets from their publishers into the layout the data check (:mod:`ring.data.folders`) expects; the
command, ``ring fetch`` (by name or a grid's), is :mod:`ring.fetch`; what each dataset's fetch gets (its recipe:
the publisher's files, their md5s, how they unpack) is :mod:`ring.data.fetch_recipes`.

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
from datetime import datetime, timezone
from pathlib import Path
from urllib.error import HTTPError, URLError
from urllib.request import Request, urlopen

from ring.core import catalog
from ring.data import fetch_recipes, folders
from ring.data.fetch_recipes import Download, Recipe

STAMP = catalog.FETCH_STAMP
STAMP_FORMAT = 1
DOWNLOADS = ".downloads"
CHUNK = 1 << 20
RETRIES = 3  # per URL; each retry resumes where the connection dropped
TIMEOUT_S = 60


class FetchError(RuntimeError):
    """A dataset could not be fetched; the message is one sentence saying why and what to do."""


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
    """Fetch ``name`` (see :func:`ring.data.fetch_recipes.recipes`); returns one line saying what was done."""
    data_root = Path(data_root)
    det_root = Path(detectron2_root) if detectron2_root else data_root / "detectron2"
    table = fetch_recipes.recipes()
    if name not in table:
        hand = fetch_recipes.by_hand(name, data_root)
        if hand:
            raise FetchError(hand)
        if name in catalog.DATASETS or name in catalog.TRANSFER:  # embedded: nothing to download
            return f"{name}: nothing to fetch ({catalog.hint(name, data_root)})"
        raise FetchError(f"Unknown dataset {name!r}; choose from {', '.join(sorted({*table, 'imagenet'}))}.")
    recipe = table[name]
    base = fetch_recipes.folder(name, data_root, det_root)
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
