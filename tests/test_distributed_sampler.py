"""tp.utils.data.DistributedSampler against torch's: the same keys for every replica without
shuffling, the same lengths, shuffled orders that are permutations shared by all replicas and
fixed by seed + epoch, DataLoader use, and the defaults taken from a process group."""

from __future__ import annotations

import sys
import types

import pytest

import tensorplay as tp
from tensorplay.utils.data import DataLoader, DistributedSampler, TensorDataset
from tensorplay.utils.data import distributed as sampler_module

SIZES = [0, 1, 2, 3, 5, 6, 7, 10, 11]


def _torch_sampler(n, **kwargs):
    torch = pytest.importorskip("torch")
    return torch.utils.data.DistributedSampler(range(n), **kwargs)


@pytest.mark.parametrize("replicas", [2, 3])
@pytest.mark.parametrize("drop_last", [False, True])
def test_keys_and_sizes_match_torch_without_shuffle(replicas, drop_last):
    for n in SIZES:
        for rank in range(replicas):
            ours = DistributedSampler(range(n), num_replicas=replicas, rank=rank, shuffle=False,
                                      drop_last=drop_last)
            theirs = _torch_sampler(n, num_replicas=replicas, rank=rank, shuffle=False, drop_last=drop_last)
            assert list(ours) == list(theirs), (n, rank)
            assert len(ours) == len(theirs)
            assert (ours.num_samples, ours.total_size) == (theirs.num_samples, theirs.total_size)


def test_padding_wraps_around_a_small_dataset():
    # 2 keys for 5 replicas: the list is repeated from its start, [0, 1, 0, 1, 0]
    torch_keys = [list(_torch_sampler(2, num_replicas=5, rank=r, shuffle=False)) for r in range(5)]
    keys = [list(DistributedSampler([7, 8], num_replicas=5, rank=r, shuffle=False)) for r in range(5)]
    assert keys == torch_keys == [[0], [1], [0], [1], [0]]


@pytest.mark.parametrize("replicas", [2, 3])
@pytest.mark.parametrize("drop_last", [False, True])
def test_shuffled_shares_cover_the_dataset(replicas, drop_last):
    for n in [1, 7, 10, 11]:
        samplers = [DistributedSampler(range(n), num_replicas=replicas, rank=r, seed=3, drop_last=drop_last)
                    for r in range(replicas)]
        shares = [list(s) for s in samplers]
        theirs = _torch_sampler(n, num_replicas=replicas, rank=0, seed=3, drop_last=drop_last)
        assert [len(s) for s in samplers] == [len(share) for share in shares] == [len(theirs)] * replicas
        keys = [k for share in shares for k in share]
        assert all(0 <= k < n for k in keys)
        if drop_last:
            # no key repeats; n // replicas * replicas distinct keys, the rest dropped
            assert len(set(keys)) == len(keys) == n // replicas * replicas
        else:
            assert set(keys) == set(range(n))


def test_shuffled_order_depends_on_seed_and_epoch_only():
    def share(rank, seed=0, epoch=None):
        s = DistributedSampler(range(20), num_replicas=2, rank=rank, seed=seed)
        if epoch is not None:
            s.set_epoch(epoch)
        return list(s)

    assert share(0) == share(0) and share(1) == share(1)
    # the replicas cut one permutation: together they hold each key once
    assert sorted(share(0) + share(1)) == list(range(20))
    assert sorted(share(0, epoch=4) + share(1, epoch=4)) == list(range(20))
    assert share(0, epoch=1) != share(0)
    assert share(0, seed=1) != share(0)
    # the generator is seeded with seed + epoch
    assert share(0, seed=2, epoch=3) == share(0, seed=5, epoch=0)

    s = DistributedSampler(range(20), num_replicas=2, rank=0, seed=0)
    first = list(s)
    assert list(s) == first  # same epoch, same order
    s.set_epoch(1)
    assert s.epoch == 1 and list(s) != first
    s.set_epoch(0)
    assert list(s) == first


def test_attributes_and_defaults():
    s = DistributedSampler(range(7), num_replicas=3, rank=2)
    assert (s.num_replicas, s.rank, s.epoch, s.shuffle, s.seed, s.drop_last) == (3, 2, 0, True, 0, False)
    assert (s.num_samples, s.total_size, len(s)) == (3, 9, 3)
    d = DistributedSampler(range(7), num_replicas=3, rank=0, shuffle=False, seed=9, drop_last=True)
    assert (d.shuffle, d.seed, d.drop_last, d.num_samples, d.total_size) == (False, 9, True, 2, 6)
    assert isinstance(s, tp.utils.data.Sampler)
    # where torch has it too: torch.utils.data.distributed.DistributedSampler
    assert sampler_module.DistributedSampler is DistributedSampler


def test_dataloader_with_distributed_sampler():
    data = TensorDataset(tp.arange(10))
    batches = [[b[0].tolist() for b in DataLoader(data, batch_size=2, sampler=DistributedSampler(
        data, num_replicas=3, rank=r, shuffle=False))] for r in range(3)]
    # keys 0..9 padded with 0, 1 to 12, every third from rank
    assert batches == [[[0, 3], [6, 9]], [[1, 4], [7, 0]], [[2, 5], [8, 1]]]

    sampler = DistributedSampler(data, num_replicas=2, rank=1, seed=4)
    loader = DataLoader(data, batch_size=5, sampler=sampler)
    assert len(loader) == 1
    assert [b[0].tolist() for b in loader] == [list(sampler)]
    with pytest.raises(ValueError, match="mutually exclusive"):
        DataLoader(data, sampler=sampler, shuffle=True)


@pytest.mark.parametrize("rank, replicas", [(2, 2), (-1, 2), (5, 3), (0, 0)])
def test_bad_rank(rank, replicas):
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError) as theirs:
        torch.utils.data.DistributedSampler(range(4), num_replicas=replicas, rank=rank)
    with pytest.raises(ValueError) as ours:
        DistributedSampler(range(4), num_replicas=replicas, rank=rank)
    assert str(ours.value) == str(theirs.value)
    assert f"Invalid rank {rank}" in str(ours.value) and f"[0, {replicas - 1}]" in str(ours.value)


def test_changed_dataset_size_is_refused():
    data = list(range(6))
    s = DistributedSampler(data, num_replicas=2, rank=0, shuffle=False)
    data.append(6)  # 7 keys no longer fit in total_size = 6
    with pytest.raises(RuntimeError, match="7 samples"):
        list(s)
    data[:] = [0, 1, 2]  # fewer keys are repeated up to 6, as for a dataset of 3
    assert list(s) == [0, 2, 1]


def _fake_dist(initialized, world_size=4, rank=3):
    module = types.ModuleType("tensorplay.distributed")
    module.is_available = lambda: True
    module.is_initialized = lambda: initialized
    module.get_world_size = lambda: world_size
    module.get_rank = lambda: rank
    return module


def test_defaults_come_from_the_process_group(monkeypatch):
    fake = _fake_dist(True, world_size=4, rank=3)
    monkeypatch.setitem(sys.modules, "tensorplay.distributed", fake)
    monkeypatch.setattr(tp, "distributed", fake, raising=False)
    s = DistributedSampler(range(10), shuffle=False)
    assert (s.num_replicas, s.rank, list(s)) == (4, 3, [3, 7, 1])  # keys 0..9, 0, 1
    assert DistributedSampler(range(10), rank=1).num_replicas == 4
    assert DistributedSampler(range(10), num_replicas=8).rank == 3


def test_defaults_without_a_process_group(monkeypatch):
    fake = _fake_dist(False)
    monkeypatch.setitem(sys.modules, "tensorplay.distributed", fake)
    monkeypatch.setattr(tp, "distributed", fake, raising=False)
    for kwargs in [{}, {"num_replicas": 2}, {"rank": 0}]:
        with pytest.raises(RuntimeError, match="Requires distributed package to be available.*init_process_group"):
            DistributedSampler(range(4), **kwargs)


def test_defaults_without_the_distributed_package(monkeypatch):
    # None in sys.modules makes the import fail, as for a missing package
    monkeypatch.setitem(sys.modules, "tensorplay.distributed", None)
    monkeypatch.delattr(tp, "distributed", raising=False)
    with pytest.raises(RuntimeError, match="Requires distributed package to be available") as info:
        DistributedSampler(range(4))
    assert isinstance(info.value.__cause__, ImportError)
