"""ring.core.yaml_reading: the one YAML reader, its YAML 1.2 floats and its refusal of a repeated key."""

import pytest

from ring.core.yaml_reading import read_yaml


def test_read_yaml_names_a_repeated_key_and_both_its_lines(tmp_path):
    path = tmp_path / "g.yaml"
    path.write_text("pretrain:\n  all:\n    lr: 0.1\n    epochs: 2\n    lr: 0.2\n")
    with pytest.raises(ValueError) as err:
        read_yaml(path, "Grid file")
    assert str(err.value) == (
        f"Grid file {path} gives the key 'lr' twice, at lines 3 and 5 (YAML would keep only the last); merge the two "
        "into one."
    )
    path.write_text("a: 1\nb: {a: 2}\n")  # the same key in two mappings is no repeat
    assert read_yaml(path) == {"a": 1, "b": {"a": 2}}


@pytest.mark.parametrize(
    "text, value",
    [("1e-4", 1e-4), ("3.0e-2", 0.03), ("-2E+3", -2000.0), ("1e4", 10000.0), ("e5", "e5"), ("1.5", 1.5), ("7", 7)],
)
def test_read_yaml_reads_yaml_1_2_exponents_as_numbers(tmp_path, text, value):
    path = tmp_path / "v.yaml"
    path.write_text(f"v: {text}\n")
    read = read_yaml(path)["v"]
    assert read == value and type(read) is type(value)
