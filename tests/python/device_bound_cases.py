"""Rank bodies for test_device_bound_groups.py and its GPU twin
(tests/gpu/test_device_bound_groups.py): a default group bound to a device
as init_process_group(device_id=...) binds it, which is what FSDP2/DeviceMesh
and DeepSpeed users do on GPUs, and the subgroups torch then makes from it:
new_group with ranks outside it (they call the parent's
perform_nocolor_split), dist.split_group and a 2-D init_device_mesh (which
deep-copy the parent's `options` and split it)."""
import copy
import datetime

# A setting the default group is given through pg_options: the groups split
# from it carry it on (through its deep-copied `options`).
SEGMENT_BYTES = "65536"
DEFAULT_SEGMENT_BYTES = "262144"


def bind_device(rank, world_size):
    """(device_id to bind, the device tensors live on).

    Where CUDA runs: this rank's GPU, and CUDA tensors. On a CPU-only torch,
    which refuses device_id="cpu" and knows no accelerator: a CUDA device id
    all the same, bound by torch's own init_process_group, with torch's
    accelerator queries answering, in this process only, as on a GPU machine
    (the one check torch makes before it binds, and the one split_group and
    DeviceMesh make before they split); the tensors stay on the CPU, where
    the same ringreduce backend serves them."""
    import torch

    if torch.cuda.is_available():
        device = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
        return device, device
    torch.accelerator.is_available = lambda: True
    torch.accelerator.current_accelerator = lambda check_available=False: torch.device("cuda")
    torch.accelerator.device_count = lambda: world_size
    return torch.device("cuda", rank), torch.device("cpu")


def _inputs(seed, rank, numel):
    """Rank `rank`'s input: fresh random integers (the test draws `seed`), so
    that every rank can compute every sum exactly."""
    import torch

    generator = torch.Generator().manual_seed(seed * 1000 + rank)
    return torch.randint(-1000, 1000, (numel,), generator=generator, dtype=torch.int64)


def _allreduce_checked(group, members, rank, seed, numel, on):
    """Sums each member's input over `group`; (sum as a list, the exact sum
    of the members' inputs)."""
    import torch
    import torch.distributed as dist

    t = _inputs(seed, rank, numel).to(on)
    dist.all_reduce(t, group=group)
    want = sum(_inputs(seed, m, numel) for m in members)
    return t.cpu().tolist(), want.tolist()


def subgroups_of_a_bound_group(rank, world_size, init_method, seed):
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    import torch_ringreduce

    device_id, on = bind_device(rank, world_size)
    ring = torch_ringreduce._C.ProcessGroupRing
    # Which ranks torch asks to take part in a split without joining.
    nocolor = []
    original = ring.perform_nocolor_split

    def counted(self, device):
        nocolor.append(str(device))
        return original(self, device)

    ring.perform_nocolor_split = counted

    given = torch_ringreduce.Options(config={"RINGREDUCE_SEGMENT_BYTES": SEGMENT_BYTES})
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world_size, device_id=device_id, pg_options=given,
                            timeout=datetime.timedelta(seconds=120))
    world = dist.group.WORLD
    backend = world._get_backend(device_id)
    out = {"bound": str(world.bound_device_id), "backend": type(backend).__name__,
           "world_segment": torch_ringreduce.config()["RINGREDUCE_SEGMENT_BYTES"]}
    options = copy.deepcopy(backend.options)
    out["options"] = (type(options).__name__, options._timeout.total_seconds(),
                      dict(options.config))

    # new_group: ranks 1 and 3 are outside it; torch calls our
    # perform_nocolor_split on them. With the parent's options the new
    # group runs as the parent; without, from the environment alone (as
    # a NCCL new_group gets default options).
    pair = dist.new_group([0, 2], pg_options=backend.options)
    plain = dist.new_group([1, 3])
    mine = pair if rank in (0, 2) else plain
    members = [0, 2] if rank in (0, 2) else [1, 3]
    out["new_group"] = _allreduce_checked(mine, members, rank, seed, 1000, on)
    out["new_group_segment"] = torch_ringreduce.config(mine)["RINGREDUCE_SEGMENT_BYTES"]
    outside = plain if rank in (0, 2) else pair
    out["outside"] = outside is dist.GroupMember.NON_GROUP_MEMBER
    out["nocolor"] = list(nocolor)

    # dist.split_group: deep-copies our options, then ProcessGroup.split_group.
    half = dist.split_group(split_ranks=[[0, 1], [2, 3]])
    halves = [0, 1] if rank < 2 else [2, 3]
    out["split"] = _allreduce_checked(half, halves, rank, seed + 1, 777, on)
    out["split_bound"] = str(half.bound_device_id)
    out["split_segment"] = torch_ringreduce.config(half)["RINGREDUCE_SEGMENT_BYTES"]

    # A 2-D DeviceMesh splits the default group along each dimension.
    mesh = init_device_mesh(on.type, (2, 2), mesh_dim_names=("dp", "tp"))
    out["mesh"] = {}
    for dim, name in enumerate(("dp", "tp")):
        group = mesh.get_group(name)
        ranks = dist.get_process_group_ranks(group)
        out["mesh"][name] = {
            "ranks": ranks,
            "backend": dist.get_backend(group),
            "segment": torch_ringreduce.config(group)["RINGREDUCE_SEGMENT_BYTES"],
            "sum": _allreduce_checked(group, ranks, rank, seed + 2 + dim, 513, on),
        }

    # Settings that are none: every member refuses to make the group.
    try:
        dist.new_group([0, 1, 2, 3], pg_options=torch_ringreduce.Options(
            config={"RINGREDUCE_NO_SUCH_SETTING": "1"}))
        out["bad_setting"] = None
    except ValueError as error:
        out["bad_setting"] = str(error)
    try:
        backend.perform_nocolor_split(torch.device("meta"))
        out["bad_device"] = None
    except ValueError as error:
        out["bad_device"] = str(error)
    # The parent still works after all of this.
    out["world"] = _allreduce_checked(None, list(range(world_size)), rank, seed + 9, 64, on)
    return out
