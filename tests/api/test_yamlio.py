"""YAML reading: checks made before anything is built (issue 35, items 7 and 20)."""

from __future__ import annotations

import pytest

from lavaflow.api import yamlio
from lavaflow.api.loader import InputError, load_text
from lavaflow.scheduler.framework.conf import SchedulerConfError, load_scheduler_conf


def laughs(levels: int, width: int = 9) -> str:
    lines = ["a0: &a0 [" + ", ".join(['"lol"'] * width) + "]"]
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_before_it_is_expanded():
    with pytest.raises(yamlio.YamlError, match="excessive aliasing"):
        list(yamlio.load_all(laughs(9)))  # 9^10 values from ten lines


def test_aliases_that_expand_moderately_are_read():
    doc = yamlio.load(laughs(3))  # 9^4 = 6,561 values
    assert len(doc["a3"]) == 9 and doc["a3"][0][0][0] == ["lol"] * 9


def test_a_recursive_alias_is_refused():
    with pytest.raises(yamlio.YamlError, match="recursive alias") as err:
        yamlio.load("a: &x\n  b: *x\n")
    assert err.value.line == 1


def test_duplicate_keys_are_refused_with_both_places():
    with pytest.raises(yamlio.YamlError, match=r"duplicate key 'name' \(first at line 2, column 3\)") as err:
        yamlio.load("metadata:\n  name: a\n  name: b\n")
    assert (err.value.line, err.value.column) == (3, 3)


def test_merge_keys_and_equal_values_under_different_types_are_not_duplicates():
    doc = yamlio.load("base: &b {x: 1}\nm:\n  <<: *b\n  <<: {y: 2}\n  z: 3\nk: {1: a, '1': b}\n")
    assert doc["m"] == {"x": 1, "y": 2, "z": 3} and doc["k"] == {1: "a", "1": "b"}


def test_a_control_character_is_one_error_with_its_place():
    with pytest.raises(yamlio.YamlError) as err:
        yamlio.load("a: 1\nb: x\x00y\n")
    assert str(err.value) == "line 2, column 5: character U+0000 is not allowed in YAML"


def test_one_document_is_expected_where_one_is_read():
    with pytest.raises(yamlio.YamlError, match="one YAML document"):
        yamlio.load("a: 1\n---\nb: 2\n")


def test_object_input_names_the_file_and_place():
    with pytest.raises(InputError) as err:
        load_text("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  name: q\n", name="pods.yaml")
    assert err.value.problems == [
        "pods.yaml: line 5, column 3: not valid YAML (duplicate key 'name' (first at line 4, column 3))"
    ]
    with pytest.raises(InputError) as err:
        load_text("kind: Pod\nmetadata:\n" + "\n".join("  " + ln for ln in laughs(9).splitlines()), name="b.yaml")
    assert (
        len(err.value.problems) == 1
        and "b.yaml: line 1, column 1: not valid YAML (excessive aliasing" in (err.value.problems[0])
    )


def test_scheduler_configuration_refuses_a_bomb_in_plugin_arguments():
    conf = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: binpack\n    arguments:\n' + "\n".join(
        "      " + ln for ln in laughs(9).splitlines()
    )
    with pytest.raises(SchedulerConfError, match="excessive aliasing"):
        load_scheduler_conf(conf)
    with pytest.raises(SchedulerConfError, match="line 2, column 1 of the configuration: duplicate key 'actions'"):
        load_scheduler_conf('actions: "allocate"\nactions: "enqueue"\n')
