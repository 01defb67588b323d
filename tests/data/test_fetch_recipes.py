"""ring.data.fetch_recipes: what ``ring fetch`` gets for each dataset; the fetch itself, against a loopback server,
is tests/data/test_download.py's."""

from ring.core import catalog
from ring.data import fetch_recipes


def test_every_catalog_dataset_is_fetched_or_explained(tmp_path):
    from ring.data.metadataset import GENERATORS

    table = fetch_recipes.recipes()
    # The torch-free check names what fetch gets (its missing-dataset sentences point at the fetch command).
    assert catalog.FETCHED == table.keys() & {*catalog.DATASETS, *catalog.TRANSFER}
    for name in [*catalog.DATASETS, *catalog.TRANSFER]:
        embedded = not catalog.spec(name).required or name in GENERATORS
        assert name in table or fetch_recipes.by_hand(name, tmp_path) or embedded, name


def test_detection_recipes_and_only_they_unpack_below_the_detectron2_folder(tmp_path):
    data, detectron2 = tmp_path / "data", tmp_path / "detectron2"
    for name, recipe in fetch_recipes.recipes().items():
        base = fetch_recipes.folder(name, data, detectron2)
        assert (base.parent == detectron2) == recipe.detection, name
        assert recipe.detection or base == catalog.folder(name, data), name
