"""ring.fetch, the ``ring fetch`` command: the datasets named, or every dataset a grid reads, each fetched once by
ring.data.download; no dataset named is refused in one sentence."""

from ring import fetch as command
from ring import resources
from ring.plan import grid as grid_plan


def _fetched(monkeypatch) -> list:
    calls = []
    monkeypatch.setattr(command, "fetch", lambda name, root, mirror, det_root: calls.append((name, root)) or name)
    return calls


def test_the_named_datasets_and_a_grids_are_each_fetched_once(monkeypatch, tmp_path):
    calls = _fetched(monkeypatch)
    grid = grid_plan.datasets_read(grid_plan.load(grid_plan.resolve("smoke", resources.GRIDS)))
    assert command.main(["cifar10", grid[0], "--grid", "smoke", "--data-root", str(tmp_path)]) == 0
    assert calls == [(name, str(tmp_path)) for name in dict.fromkeys(["cifar10", grid[0], *grid])]


def test_nothing_to_fetch_is_one_sentence(monkeypatch, capsys):
    calls = _fetched(monkeypatch)
    assert command.main([]) == 1
    assert capsys.readouterr().err == "ring: Name datasets to fetch, or --grid GRID.\n" and not calls
