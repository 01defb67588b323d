"""The dataset catalog, on the ground floor (torch-free: the workflow client, the plan and the compute side read it).

One entry per dataset: its display name, classes, input normalisation, the images of each split (the publisher's
counts: the plan bounds batch and bank sizes and prices a pass with them before any data is there), the files its
folder ``<data_root>/<name>/`` must hold (the layout its publisher, or torchvision's downloader given that folder as
``root``, produces) and how to get it (:func:`hint`: the ``ring fetch`` command of :mod:`ring.data.download` where it
can fetch the dataset, the steps by hand where it cannot).  The check of a folder against its entry is
:mod:`ring.data.folders`; the loaders are :mod:`ring.data.datasets` and :mod:`ring.data.metadataset`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path


class DatasetMissing(FileNotFoundError):
    """A dataset is absent or incomplete under the data root."""


@dataclass(frozen=True)
class DatasetSpec:
    display: str  # column name in the paper's tables
    num_classes: int
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    required: tuple[str, ...]  # files or folders below <data_root>/<name> that must exist
    how_to_get: str
    # Labelled training images (linear evaluation) and, where pretraining sees more, the images it
    # trains on (its memory bank); the publisher's counts, so the plan bounds batch and bank sizes.
    train_images: int = 0
    pretrain_images: int = 0  # 0: train_images
    test_images: int = 0  # the test split's (the kNN monitor and linear evaluation read it once per pass)
    # Verification against the publisher (verify): the torchvision class whose md5 lists cover the
    # files, or the publisher's (train, val) image counts in class folders.
    torchvision_md5: str | None = None
    publisher_counts: tuple[int, int] | None = None
    # Grey images (one channel, replicated to three): their Lab ab channels are constant, so CMC's ab view
    # carries nothing (ring.plan.checks warns at plan time).
    grey: bool = False
    # Image folders (<split>/<class>/<image>) that the prepare stage packs into a store (ring.data.store): the resize
    # of the paper's protocol for this dataset, done once; cells with another resize read the files.  0: no store.
    store_size: int = 0
    # "module:name" of its loader, (folder, split) -> dataset (ring.data.datasets), resolved where it loads.
    loader: str | None = None
    fetched: bool = False  # ring fetch downloads it (its recipe in ring.data.fetch_recipes needs torchvision)
    name: str = ""  # its key in DATASETS (set there): a resolved entry names its folder without a lookup

    def bank_images(self) -> int:
        """Images a pretraining cell of this dataset trains on (its memory bank's size)."""
        return self.pretrain_images or self.train_images


def _torchvision_hint(cls: str, name: str, extra: str = "") -> str:
    return (
        f"run `python -c \"import torchvision; torchvision.datasets.{cls}('<data_root>/{name}'{extra}, "
        f'download=True)"` '
        "on a machine with internet and copy the folder there"
    )


# digits_folder's per-channel statistics (its entry below): the training split's pixels after Resize((32, 32)).
MEAN_FOLDER = (0.2334, 0.2270, 0.2307)
STD_FOLDER = (0.2953, 0.2876, 0.2915)


DATASETS: dict[str, DatasetSpec] = {
    # The embedded default: scikit-learn's UCI optical digits, real 8x8 grey images (see ring.data.datasets).
    "digits": DatasetSpec(
        loader="ring.data.datasets:_build_digits",
        display="Digits",
        num_classes=10,
        # Mean/std of the training split's 0..255 pixels (asserted by tests/data/test_datasets.py).
        mean=(0.3053,) * 3,
        std=(0.3758,) * 3,
        required=(),
        how_to_get="it ships inside scikit-learn; install scikit-learn",
        train_images=1347,  # the fixed 75% split of ring.data.datasets
        test_images=450,
        grey=True,
    ),
    # Its colour variant (the smoke grid's): the same images and split, each tinted by a seeded hue, so that CMC's ab
    # view draws the digit (ring.data.digits.tint).
    "digits_colour": DatasetSpec(
        loader="ring.data.datasets:_build_digits_colour",
        display="Digits (colour)",
        num_classes=10,
        # Per-channel mean/std of the training split's 0..255 pixels (asserted by tests/data/test_datasets.py).
        mean=(0.2323, 0.2260, 0.2297),
        std=(0.3058, 0.2977, 0.3017),
        required=(),
        how_to_get="it ships inside scikit-learn (tinted by ring.data.datasets); install scikit-learn",
        train_images=1347,
        test_images=450,
    ),
    "cifar10": DatasetSpec(
        fetched=True,
        loader="ring.data.datasets:_build_cifar10",
        display="CIFAR10",
        num_classes=10,
        mean=(0.4914, 0.4822, 0.4465),
        std=(0.2470, 0.2435, 0.2616),
        required=(
            "cifar-10-batches-py/data_batch_1",
            "cifar-10-batches-py/data_batch_5",
            "cifar-10-batches-py/test_batch",
        ),
        how_to_get=_torchvision_hint("CIFAR10", "cifar10"),
        train_images=50000,
        test_images=10000,
        torchvision_md5="CIFAR10",
    ),
    "cifar100": DatasetSpec(
        fetched=True,
        loader="ring.data.datasets:_build_cifar100",
        display="CIFAR100",
        num_classes=100,
        mean=(0.5071, 0.4865, 0.4409),
        std=(0.2673, 0.2564, 0.2762),
        required=("cifar-100-python/train", "cifar-100-python/test"),
        how_to_get=_torchvision_hint("CIFAR100", "cifar100"),
        train_images=50000,
        test_images=10000,
        torchvision_md5="CIFAR100",
    ),
    "stl10": DatasetSpec(
        fetched=True,
        loader="ring.data.datasets:_build_stl10",
        display="STL10",
        num_classes=10,
        mean=(0.4467, 0.4398, 0.4066),
        std=(0.2603, 0.2566, 0.2713),
        required=("stl10_binary/train_X.bin", "stl10_binary/test_X.bin", "stl10_binary/unlabeled_X.bin"),
        how_to_get=_torchvision_hint("STL10", "stl10", ", split='train+unlabeled'"),
        torchvision_md5="STL10",
        train_images=5000,
        pretrain_images=105000,  # pretraining adds the 100k unlabeled images
        test_images=8000,
    ),
    "imagenet": DatasetSpec(
        loader="ring.data.datasets:_build_image_folder",
        display="ImageNet",
        num_classes=1000,
        mean=(0.485, 0.456, 0.406),
        std=(0.229, 0.224, 0.225),
        required=("train", "val"),
        # ImageNet needs an account: ring.data.download cannot get it, so these are the steps by hand.
        how_to_get="log in at image-net.org, accept the ILSVRC2012 terms, download ILSVRC2012_img_train.tar, "
        "ILSVRC2012_img_val.tar and ILSVRC2012_devkit_t12.tar.gz into <data_root>/imagenet, then run "
        "`python -c \"import torchvision as tv; [tv.datasets.ImageNet('<data_root>/imagenet', split=s) for s in "
        "('train', 'val')]\"`, which checks their md5s and unpacks them into <data_root>/imagenet/{train,val}/"
        "<wnid>/*.JPEG (validation images sorted into class folders)",
        train_images=1281167,  # ILSVRC2012 train
        test_images=50000,  # ILSVRC2012 validation, the test split
        publisher_counts=(1281167, 50000),  # ILSVRC2012's train and validation images
        store_size=256,  # Sec. 5: "We resize input images to be 256 by 256 pixels"
    ),
    # The colour digits as an image folder of PNGs of varied sizes (ring.data.digits.generate_folder): ImageNet's
    # path (files, the prepare stage's store, the device views from it) on a CPU in seconds.
    "digits_folder": DatasetSpec(
        loader="ring.data.datasets:_build_image_folder",
        display="Digits (folder)",
        num_classes=10,
        # Per-channel mean/std of the training split at 32x32 (asserted by tests/data/test_digits.py).
        mean=MEAN_FOLDER,
        std=STD_FOLDER,
        required=("train", "val", "generated.json"),
        how_to_get="generate it with `ring generate digits_folder --data-root <data_root>` (the workflow does this "
        "itself)",
        train_images=1347,
        test_images=450,
        publisher_counts=(1347, 450),
        store_size=32,  # the smoke grid's resize: the digits are 8x8
    ),
}


@dataclass(frozen=True)
class TransferSpec:
    """A dataset that CIFAR10 encoders are transferred to (Table 3).  Its input normalisation is not
    a constant: it is computed from the training split (:mod:`ring.data.metadataset`)."""

    display: str  # column name in Table 3
    num_classes: int
    required: tuple[str, ...]  # annotation files (and image folders) below <data_root>/<name>
    how_to_get: str
    split: str  # the documented, deterministic train/test split
    publisher_counts: tuple[int, int] | None  # (train, test) images of the full release; None: depends on filters
    # "module:name" of its listing, folder -> its train/test split (ring.data.listings), and of its loader,
    # (folder, split, that split's listing) -> dataset (ring.data.metadataset); resolved where they run.
    listing: str = ""
    loader: str = ""
    fetched: bool = False  # ring fetch downloads it (its recipe: ring.data.fetch_recipes.recipes)
    name: str = ""  # its key in TRANSFER (set there)


_FUNGI_HINT = (
    "the FGVCx Fungi 2018 release (fungi_train_val.tgz and train_val_annotations.tgz) has moved from its original "
    "labs.gbif.org links: find the current links in the README of github.com/visipedia/fgvcx_fungi_comp (or "
    "Meta-Dataset's "
    "conversion instructions), then extract both archives into <data_root>/fungi so that it holds train.json, val.json "
    "and images/"
)


def _idx_spec(cls: str, name: str) -> TransferSpec:
    """MNIST and FashionMNIST: the publisher's idx files, where torchvision puts them (<root>/<cls>/raw)."""
    return TransferSpec(
        display=cls,
        num_classes=10,
        required=tuple(
            f"{cls}/raw/{split}-{kind}"
            for split in ("train", "t10k")
            for kind in ("images-idx3-ubyte", "labels-idx1-ubyte")
        ),
        how_to_get=_torchvision_hint(cls, name),
        split="the publisher's 60,000 train / 10,000 t10k images",
        publisher_counts=(60000, 10000),
        fetched=True,
        listing=f"ring.data.listings:_list_{name}",
        loader=f"ring.data.metadataset:_tv_{name}_parts",
    )


TRANSFER: dict[str, TransferSpec] = {
    # The nine Meta-Dataset image sets of Table 3, each in the layout its publisher (or torchvision's
    # downloader with root=<data_root>/<name>) produces.  README "Transfer (Table 3)" lists them.
    "aircraft": TransferSpec(
        fetched=True,
        listing="ring.data.listings:_list_aircraft",
        loader="ring.data.metadataset:_tv_aircraft_parts",
        display="Aircraft",
        num_classes=100,
        required=(
            "fgvc-aircraft-2013b/data/variants.txt",
            "fgvc-aircraft-2013b/data/images_variant_trainval.txt",
            "fgvc-aircraft-2013b/data/images_variant_test.txt",
            "fgvc-aircraft-2013b/data/images",
        ),
        how_to_get=_torchvision_hint("FGVCAircraft", "aircraft"),
        split="the publisher's variant-level images_variant_trainval.txt / images_variant_test.txt",
        publisher_counts=(6667, 3333),
    ),
    "cub": TransferSpec(
        fetched=True,
        listing="ring.data.listings:_list_cub",
        loader="ring.data.metadataset:_files",
        display="CUBirds",
        num_classes=200,
        required=(
            "CUB_200_2011/images.txt",
            "CUB_200_2011/image_class_labels.txt",
            "CUB_200_2011/train_test_split.txt",
            "CUB_200_2011/images",
        ),
        how_to_get=(
            "download CUB_200_2011.tgz from data.caltech.edu/records/65de6-vzc43 and extract it into <data_root>/cub"
        ),
        split="the publisher's CUB_200_2011/train_test_split.txt (1 = train, 0 = test)",
        publisher_counts=(5994, 5794),
    ),
    "dtd": TransferSpec(
        fetched=True,
        listing="ring.data.listings:_list_dtd",
        loader="ring.data.metadataset:_tv_dtd_parts",
        display="DTD",
        num_classes=47,
        required=("dtd/dtd/labels/train1.txt", "dtd/dtd/labels/val1.txt", "dtd/dtd/labels/test1.txt", "dtd/dtd/images"),
        how_to_get=_torchvision_hint("DTD", "dtd"),
        split="the publisher's split 1: labels/train1.txt + val1.txt for training, labels/test1.txt for testing",
        publisher_counts=(3760, 1880),
    ),
    "fungi": TransferSpec(
        fetched=True,
        listing="ring.data.listings:_list_fungi",
        loader="ring.data.metadataset:_files",
        display="Fungi",
        num_classes=1394,
        required=("train.json", "val.json", "images"),
        how_to_get=_FUNGI_HINT,
        split=(
            "the FGVCx 2018 competition's train.json for training and val.json for testing "
            "(its test labels are private)"
        ),
        publisher_counts=(85578, 4182),
    ),
    "mnist": _idx_spec("MNIST", "mnist"),
    "fashion_mnist": _idx_spec("FashionMNIST", "fashion_mnist"),
    "traffic_sign": TransferSpec(
        fetched=True,
        listing="ring.data.listings:_list_gtsrb",
        loader="ring.data.metadataset:_tv_gtsrb_parts",
        display="TrafficSign",
        num_classes=43,
        required=("gtsrb/GT-final_test.csv", "gtsrb/GTSRB/Training", "gtsrb/GTSRB/Final_Test/Images"),
        how_to_get=_torchvision_hint("GTSRB", "traffic_sign", ", split='test'") + " (and again with split='train')",
        split="GTSRB's training images (GTSRB/Training/<class>/*.ppm) / its final test set (GT-final_test.csv)",
        publisher_counts=(26640, 12630),
    ),
    "vgg_flower": TransferSpec(
        fetched=True,
        listing="ring.data.listings:_list_flowers",
        loader="ring.data.metadataset:_files",
        display="VGGFlower",
        num_classes=102,
        required=("flowers-102/imagelabels.mat", "flowers-102/setid.mat", "flowers-102/jpg"),
        how_to_get=_torchvision_hint("Flowers102", "vgg_flower"),
        split="the publisher's setid.mat: trnid + valid for training, tstid for testing",
        publisher_counts=(2040, 6149),
    ),
    "mscoco": TransferSpec(
        fetched=True,
        listing="ring.data.listings:_list_mscoco",
        loader="ring.data.metadataset:_files",
        display="MSCOCO",
        num_classes=80,
        required=("annotations/instances_train2017.json", "annotations/instances_val2017.json", "train2017", "val2017"),
        how_to_get="download train2017.zip, val2017.zip and annotations_trainval2017.zip from "
        "cocodataset.org/#download "
        "and extract them into <data_root>/mscoco",
        split="object crops (non-crowd boxes of at least 32x32 pixels) of train2017 for training, of val2017 for "
        "testing, at most 500 / 100 per class drawn with seed 0",
        publisher_counts=None,
    ),
    # The embedded default's transfer column: procedurally generated shapes (ring.data.metadataset),
    # written as PNG class folders plus generated.json, split 80/20 per class with seed 0 as for a
    # dataset that ships no split.
    "shapes": TransferSpec(
        listing="ring.data.listings:_list_shapes",
        loader="ring.data.metadataset:_files",
        display="Shapes",
        num_classes=6,
        required=("generated.json",),
        how_to_get="generate it with `ring generate shapes --data-root <data_root>` "
        "(the smoke workflow does this itself)",
        split="80/20 per class with seed 0",
        publisher_counts=(960, 240),  # ring.data.listings.SHAPES_PER_CLASS
    ),
}
assert not TRANSFER.keys() & DATASETS.keys()
# Each entry carries its key: a stage hands the entry down (ring.pretrain.resolve), never the name to look up again.
DATASETS = {name: replace(entry, name=name) for name, entry in DATASETS.items()}
TRANSFER = {name: replace(entry, name=name) for name, entry in TRANSFER.items()}


def spec(name: str) -> DatasetSpec | TransferSpec:
    if name in TRANSFER:
        return TRANSFER[name]
    if name not in DATASETS:
        raise ValueError(f"Unknown dataset {name!r}; choose one of {', '.join([*DATASETS, *TRANSFER])}.")
    return DATASETS[name]


def folder(name: str, data_root: str | Path) -> Path:
    return Path(data_root) / name


# The catalog datasets that ring.data.download downloads, named torch-free (tests/data/test_fetch_recipes.py asserts
# that they are the ones its recipes cover).
FETCHED = frozenset(name for name, entry in {**DATASETS, **TRANSFER}.items() if entry.fetched)
FETCH_STAMP = ".ring-fetch.json"  # written by ring.data.download into a dataset folder it filled


def hint(name: str, data_root: str | Path) -> str:
    """How to get a missing or damaged dataset: the fetch command where ring.data.download gets it (then the
    steps by hand too, for a machine that cannot reach the publisher), else the steps by hand."""
    root = Path(data_root)
    by_hand = spec(name).how_to_get.replace("<data_root>", str(root))
    if name not in FETCHED:
        return by_hand
    return (
        f"fetch it with `ring fetch {name} --data-root {root}` (or every dataset of the grid with "
        f"`snakemake fetch_data`) on a machine with internet, or by hand: {by_hand}"
    )


def loader_verifies(name: str) -> bool:
    """Whether the dataset's loader (torchvision's) reads its files only when their md5 is the publisher's:
    skip_checksums cannot be honoured there (CIFAR's files are Python pickles, never read unverified)."""
    return getattr(spec(name), "torchvision_md5", None) is not None


def skip_refusal(name: str) -> str:
    """The sentence refusing skip_checksums for a dataset whose loader verifies md5s itself."""
    return (
        f"skip_checksums cannot be honoured for {name}: its loader reads the files only when their md5 is the "
        f"publisher's (torchvision's; {'CIFAR' if name.startswith('cifar') else 'its'} files are never read "
        "unverified), so a modified copy would pass the data check and fail in the job; restore the publisher's "
        "files and set skip_checksums: false."
    )


SKIP_HINT = (
    "or, for your own modified copy, skip the comparison with the publisher with --skip-checksums "
    "(workflow config: skip_checksums: true)"
)
