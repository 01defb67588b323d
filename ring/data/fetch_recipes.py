"""What ``ring fetch`` gets for each dataset: its recipe, the publisher's files (URLs, md5s), how each is unpacked
and where; the downloading, verifying, unpacking and stamping of them is :mod:`ring.data.download`'s.

A recipe takes its URLs and md5s from torchvision's class attributes where torchvision has a downloader (so they are
not written twice), else from the publisher's page.  A dataset ``ring fetch`` gets has its recipe here and
``fetched=True`` in its catalog entry (:data:`ring.core.catalog.FETCHED`, which names them torch-free); one that needs
an account is explained instead (:func:`by_hand`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ring.core import catalog


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
