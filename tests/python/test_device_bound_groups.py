"""Subgroups of a group bound to a device (issue 50, item 1).

init_process_group(..., device_id=torch.device("cuda", i)) is how FSDP2,
DeviceMesh and DeepSpeed users start on GPUs. torch then makes subgroups from
the bound group: new_group's ranks outside the new group call the parent's
perform_nocolor_split, split_group and DeviceMesh deep-copy the parent's
`options` and split it. Here on CPU tensors, the binding made by torch's own
init_process_group (device_id on a CUDA index, with torch's accelerator
queries answering as on a GPU machine inside the ranks: see
device_bound_cases.bind_device); tests/gpu has the same on CUDA tensors."""
import copy
import datetime
import random

import pytest

import device_bound_cases
from multiproc import run_world


@pytest.fixture(scope="module")
def world_of_four():
    seed = random.randrange(1 << 20)
    return run_world(4, device_bound_cases.subgroups_of_a_bound_group, seed, timeout=300)


def _bound(rank):
    return f"cuda:{rank}"  # what bind_device binds on a CPU-only torch


def check_binding_and_options(results, bound):
    for rank, r in enumerate(results):
        assert r["bound"] == bound(rank)
        assert r["backend"] == "ProcessGroupRing"
        assert r["world_segment"] == device_bound_cases.SEGMENT_BYTES
        assert r["options"] == ("Options", 120.0,
                                {"RINGREDUCE_SEGMENT_BYTES": device_bound_cases.SEGMENT_BYTES})
        assert r["world"][0] == r["world"][1]


def check_new_group(results, bound):
    for rank, r in enumerate(results):
        got, want = r["new_group"]
        assert got == want, rank
        assert r["outside"] is True
        # torch asked this rank once, for the one new group it is not in.
        assert r["nocolor"] == [bound(rank)]
        # With the parent's options, its settings; without, the environment's.
        expected = (device_bound_cases.SEGMENT_BYTES if rank in (0, 2)
                    else device_bound_cases.DEFAULT_SEGMENT_BYTES)
        assert r["new_group_segment"] == expected


def check_split_group(results, bound):
    for rank, r in enumerate(results):
        got, want = r["split"]
        assert got == want, rank
        assert r["split_bound"] == bound(rank)
        assert r["split_segment"] == device_bound_cases.SEGMENT_BYTES


def check_device_mesh(results, bound):
    for rank, r in enumerate(results):
        dp, tp = r["mesh"]["dp"], r["mesh"]["tp"]
        assert tp["ranks"] == [rank - rank % 2, rank - rank % 2 + 1]
        assert dp["ranks"] == [rank % 2, rank % 2 + 2]
        for dim in (dp, tp):
            assert dim["backend"] == "ringreduce"
            assert dim["segment"] == device_bound_cases.SEGMENT_BYTES
            assert dim["sum"][0] == dim["sum"][1], (rank, dim["ranks"])


def check_refusals(results, bound):
    for r in results:
        assert "RINGREDUCE_NO_SUCH_SETTING" in r["bad_setting"]
        assert "is not a setting" in r["bad_setting"]
        assert "perform_nocolor_split" in r["bad_device"] and "meta" in r["bad_device"]


CHECKS = [check_binding_and_options, check_new_group, check_split_group, check_device_mesh,
          check_refusals]


def test_the_group_binds_and_its_options_deep_copy(world_of_four):
    check_binding_and_options(world_of_four, _bound)


def test_new_group_with_ranks_outside_it(world_of_four):
    check_new_group(world_of_four, _bound)


def test_split_group_of_the_bound_group(world_of_four):
    check_split_group(world_of_four, _bound)


def test_two_dimensional_device_mesh(world_of_four):
    check_device_mesh(world_of_four, _bound)


def test_bad_options_and_devices_are_refused_by_name(world_of_four):
    check_refusals(world_of_four, _bound)


def test_options_outside_a_group():
    import torch_ringreduce

    options = torch_ringreduce.Options(timeout=datetime.timedelta(seconds=7),
                                       config={"RINGREDUCE_SEGMENT_BYTES": 4096,
                                               "RINGREDUCE_ENABLE_TIMING": True})
    assert options._timeout == datetime.timedelta(seconds=7)
    assert options.backend == "ringreduce"
    assert dict(options.config) == {"RINGREDUCE_SEGMENT_BYTES": "4096",
                                    "RINGREDUCE_ENABLE_TIMING": "1"}
    twin = copy.deepcopy(options)
    twin.config = {"RINGREDUCE_SPIN_US": "0"}
    assert dict(options.config)["RINGREDUCE_SEGMENT_BYTES"] == "4096"  # a real copy
    assert dict(twin.config) == {"RINGREDUCE_SPIN_US": "0"}
    assert twin._timeout == options._timeout
    with pytest.raises(TypeError):
        options.config["RINGREDUCE_SPIN_US"] = "1"  # a view: assign a dict instead
    with pytest.raises(TypeError):
        torch_ringreduce.Options(config={1: "x"})
    # What the backend's creator takes from pg_options.
    assert torch_ringreduce._settings_of(None) == {}
    assert torch_ringreduce._settings_of(twin) == {"RINGREDUCE_SPIN_US": "0"}
    with pytest.raises(TypeError, match="pg_options must be torch_ringreduce.Options"):
        torch_ringreduce._settings_of({"RINGREDUCE_SPIN_US": "0"})
