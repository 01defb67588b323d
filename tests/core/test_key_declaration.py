"""ring.core.key_declaration: a group of keys makes the frozen config its part receives, and the flat view's fields."""

import dataclasses

import pytest

from ring.core.key_declaration import Key, KeyGroup, integer_key, with_method_keys

GROUP = KeyGroup(
    "toy",
    (
        integer_key("toy_k", 8, 1, "The toy's k."),
        Key("toy_bounds", "list[float]", [0.0, 1.0], "Its bounds.", "a pair"),
    ),
)


def test_a_group_reads_its_own_keys_into_a_frozen_config_named_after_it():
    cfg = GROUP.read({"toy_k": 3, "toy_bounds": [0.5, 0.9], "epochs": 10})
    assert type(cfg).__name__ == "ToyKeys" and dataclasses.asdict(cfg) == {"toy_k": 3, "toy_bounds": (0.5, 0.9)}
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.toy_k = 4
    with pytest.raises(TypeError):  # a list value is held as a tuple: frozen all the way down
        cfg.toy_bounds[0] = 0.1
    with pytest.raises(KeyError):
        GROUP.read({"toy_k": 3})  # a value missing is an error, never a default slipped in


def test_a_groups_defaults_are_fresh_copies():
    first, second = GROUP.defaults(), GROUP.defaults()
    first["toy_bounds"].append(2.0)
    assert second == {"toy_k": 8, "toy_bounds": [0.0, 1.0]} == dataclasses.asdict(GROUP.config())


def test_the_flat_view_puts_a_groups_keys_right_after_the_field_named_for_it():
    @dataclasses.dataclass
    @with_method_keys({"a": (GROUP,)})
    class Flat:
        a: int = 0
        b: int = 1

    assert [f.name for f in dataclasses.fields(Flat)] == ["a", "toy_k", "toy_bounds", "b"]
    one, two = Flat(), Flat()
    one.toy_bounds.append(5.0)
    assert two.toy_bounds == [0.0, 1.0] and two.toy_k == 8
