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


# Documents read as PyYAML's SafeLoader reads them: scalars of every core type (YAML 1.1's octal,
# sexagesimal and underscored integers, its many booleans, infinities, empty values), explicit
# tags, aliases shared, merge keys, the tags only SafeConstructor builds (timestamps, binary,
# sets), and keys that are equal values of different types.
SAME_AS_SAFE_LOADER = [
    "a: 1\nb: 017\nc: 0x1F\nd: 1_000\ne: 1:20\nf: -0b101\ng: +3\nh: 0o17\n",
    "a: 1.5\nb: 1e3\nc: .inf\nd: -.Inf\ne: 6.8523015e+5\nf: 1_0.5\ng: 190:20:30.15\n",
    "[yes, No, on, OFF, true, False, y, n, ~, null, '', \"\", 'yes', \"1\"]\n",
    "a: !!str 12\nb: !!int '12'\nc: !!float '3'\nd: !!bool 'yes'\ne: !!null ''\nf: !!map {x: 1}\ng: !!seq [1]\n",
    "base: &b {x: [1, 2], y: &s text}\none: *b\ntwo: *b\nthree: [*s, *s]\n",
    "base: &b {x: 1}\nm:\n  <<: *b\n  z: 3\n",
    "t: 2024-01-02\nu: 2024-01-02T03:04:05Z\nb: !!binary aGk=\ns: !!set {a, b}\n",
    "{1: a, '1': b, true: c, 'true': d, null: e, 1.5: f}\n",
    "- - - - [deep]\n- {a: {b: {c: {}}}}\n- []\n",
]


@pytest.mark.parametrize("text", SAME_AS_SAFE_LOADER)
def test_documents_are_built_as_the_safe_loader_builds_them(text):
    import yaml

    def typed(value):  # equal and of the same types all the way down (1 == True in Python)
        if isinstance(value, dict):
            return [(typed(k), typed(v)) for k, v in value.items()]
        if isinstance(value, (list, set)):
            return [typed(v) for v in (sorted(value) if isinstance(value, set) else value)]
        return (type(value).__name__, value)

    assert typed(yamlio.load(text)) == typed(yaml.load(text, Loader=yaml.SafeLoader))


def test_an_alias_is_the_object_built_for_its_anchor():
    doc = yamlio.load("a: &x {k: [1]}\nb: *x\n")
    assert doc["a"] is doc["b"]


def test_a_value_its_tag_refuses_is_refused_as_before():
    import yaml

    for text in ("a: !!int x\n", "a: !!bool maybe\n"):  # Python's errors, raised by SafeConstructor
        with pytest.raises(Exception) as ours:
            yamlio.load(text)
        with pytest.raises(Exception) as safe:
            yaml.load(text, Loader=yaml.SafeLoader)
        assert (type(ours.value), str(ours.value)) == (type(safe.value), str(safe.value)), text
    with pytest.raises(yamlio.YamlError, match="could not determine a constructor for the tag '!foo'"):
        yamlio.load("a: !foo x\n")
    with pytest.raises(yamlio.YamlError, match="found unhashable key"):
        yamlio.load("? [1]\n: x\n")


def test_documents_nested_as_deep_as_the_parser_allows_are_read():
    depth = 999  # libyaml's limit is 1,000 levels; the walk itself has none
    doc = yamlio.load("[" * depth + "]" * depth)
    for _ in range(depth - 1):
        doc = doc[0]
    assert doc == []


def test_a_scalar_repeated_through_aliases_beyond_the_bound_is_refused():
    with pytest.raises(yamlio.YamlError, match="excessive aliasing"):
        yamlio.load("a: &x lol\nb: [" + "*x, " * 450_000 + "*x]\n")  # three values written
    assert len(yamlio.load("a: &x lol\nb: [" + "*x, " * 1_000 + "*x]\n")["b"]) == 1_001
