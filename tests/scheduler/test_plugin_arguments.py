"""Plugin arguments are checked when volcano-scheduler.conf is loaded (issue 35, items 3, 18, 20)."""

from __future__ import annotations

import pytest

from lavaflow.scheduler.framework.conf import SchedulerConfError, load_scheduler_conf


def conf(plugin: str) -> str:
    return 'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n' + plugin


def problems(text: str) -> list[tuple[str, str]]:
    with pytest.raises(SchedulerConfError) as err:
        load_scheduler_conf(text)
    return err.value.problems


@pytest.mark.parametrize(
    ("plugin", "path", "message"),
    [
        (
            "  - name: resource-strategy-fit\n    arguments:\n      resources: {nvidia.com/gpu: {type: MostAllocated, weight: x}}\n",
            "arguments[resources.nvidia.com/gpu.weight]",
            "resource-strategy-fit: expected a finite number, got the string 'x'",
        ),
        (
            "  - name: resource-strategy-fit\n    arguments:\n      sra: {enable: true, weight: .inf}\n",
            "arguments[sra.weight]",
            "resource-strategy-fit: expected a finite number, got inf",
        ),
        (
            "  - name: network-topology-aware\n    arguments:\n      hypernode.gradient.evict.max-hypernodes: .inf\n",
            "arguments[hypernode.gradient.evict.max-hypernodes]",
            "network-topology-aware: expected a finite number, got inf",
        ),
        (
            "  - name: network-topology-aware\n    arguments:\n      hypernode.gradient.evict.max-hypernodes: 2.5\n",
            "arguments[hypernode.gradient.evict.max-hypernodes]",
            "network-topology-aware: expected a positive whole number, got 2.5",
        ),
        (
            "  - name: rescheduling\n    arguments:\n      strategies: [{name: lowNodeUtilization, params: x}]\n",
            "arguments[strategies[0].params]",
            "rescheduling: expected a mapping, got the string 'x'",
        ),
        (
            "  - name: rescheduling\n    arguments:\n      interval: soon\n",
            "arguments[interval]",
            "rescheduling: ",
        ),
        ("  - name: binpack\n    arguments: {binpack.weight: .nan}\n", "arguments[binpack.weight]", "got nan"),
        ("  - name: binpack\n    arguments: {binpack.cpu: nan}\n", "arguments[binpack.cpu]", "got the string 'nan'"),
        (
            "  - name: nodegroup\n    arguments: {strict: maybe}\n",
            "arguments[strict]",
            "nodegroup: expected true or false, got the string 'maybe'",
        ),
        (
            "  - name: drf\n    enablePreemptable: 'false'\n",
            "enablePreemptable",
            "drf: expected true or false, got 'false'",
        ),
    ],
    ids=[
        "rsf-weight",
        "rsf-sra-inf",
        "nt-inf",
        "nt-fraction",
        "resched-params",
        "resched-interval",
        "nan",
        "nan-str",
        "bool-word",
        "switch-string",
    ],
)
def test_an_argument_a_session_cannot_use_is_refused_naming_tier_plugin_and_argument(plugin, path, message):
    (found,) = problems(conf(plugin))
    assert found[0] == f"tiers[0].plugins[1].{path}" and message in found[1], found


def test_a_string_false_switch_is_never_read_as_true():
    # Before, bool("false") made the switch true; now the configuration is refused, and a real
    # boolean is read as written.
    ok = load_scheduler_conf(conf("  - name: drf\n    enablePreemptable: false\n"))
    assert ok.tiers[0].plugins[1].enabled("Preemptable") is False


def test_valid_arguments_are_accepted_as_before():
    load_scheduler_conf(
        conf(
            "  - name: binpack\n    arguments: {binpack.weight: 10, binpack.cpu: '2', binpack.resources: nvidia.com/gpu,"
            " binpack.resources.nvidia.com/gpu: 5}\n"
            "  - name: nodegroup\n    arguments: {strict: 'false'}\n"
            "  - name: rescheduling\n    arguments: {interval: 5m, strategies: [{name: lowNodeUtilization,"
            " params: {thresholds: {cpu: 20}, targetThresholds: {cpu: 50}}}]}\n"
        )
    )


def test_vgpu_and_vnpu_switches_are_warned_about():
    c = load_scheduler_conf(
        conf(
            "  - name: deviceshare\n    arguments: {deviceshare.VGPUEnable: true, deviceshare.AscendHAMiVNPUEnable: true,"
            " deviceshare.GPUNumberEnable: true}\n"
        )
    )
    assert [p for p, _ in c.warnings] == [
        "tiers[0].plugins[1].arguments[deviceshare.VGPUEnable]",
        "tiers[0].plugins[1].arguments[deviceshare.AscendHAMiVNPUEnable]",
    ]
    assert all("not implemented in lavaflow" in m for _, m in c.warnings)
