"""tp.utils.data against torch.utils.data: datasets, samplers and DataLoader give PyTorch's
batches wherever the order is deterministic (no shuffling, or an explicit sampler), shuffled
orders are permutations that repeat for a seed, default_collate gives PyTorch's structures,
dtypes and values, bad arguments raise PyTorch's exception types, and worker processes
(worker_init_fn, get_worker_info, errors, early exit, persistent workers) behave as
PyTorch's."""

from __future__ import annotations

import collections
import gc
import os
from contextlib import nullcontext

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.utils.data import (
    BatchSampler,
    ChainDataset,
    ConcatDataset,
    DataLoader,
    Dataset,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
    StackDataset,
    Subset,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    default_collate,
    default_convert,
    get_worker_info,
    random_split,
)

Point = collections.namedtuple("Point", "x y")


def _torch():
    return pytest.importorskip("torch")


def _same(ours, theirs, where="batch"):
    """``ours`` (tensorplay) holds what ``theirs`` (PyTorch) holds: the same containers, and
    tensors of the same dtype, shape and values."""
    torch = _torch()
    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, tp.Tensor), f"{where}: {type(ours).__name__} where PyTorch has a tensor"
        assert ours.dtype.name == str(theirs.dtype).removeprefix("torch."), f"{where}: {ours.dtype} vs {theirs.dtype}"
        assert tuple(ours.shape) == tuple(theirs.shape), where
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy(), err_msg=where)
    elif isinstance(theirs, dict):
        assert type(ours) is type(theirs) and list(ours) == list(theirs), where
        for k in theirs:
            _same(ours[k], theirs[k], f"{where}[{k!r}]")
    elif isinstance(theirs, (list, tuple)):
        assert type(ours).__name__ == type(theirs).__name__ and len(ours) == len(theirs), where
        for i, (o, t) in enumerate(zip(ours, theirs)):
            _same(o, t, f"{where}[{i}]")
    else:
        assert ours == theirs and type(ours) is type(theirs), where


# --- datasets ------------------------------------------------------------------------------

class Squares(Dataset):
    """Map-style: sample i is (a tensor [i, i*i], the id of the worker that loaded it or -1)."""

    def __init__(self, n: int, fail_at: int | None = None):
        self.n, self.fail_at = n, fail_at

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.fail_at:
            raise ValueError(f"sample {i} is corrupt")
        info = get_worker_info()
        return tp.tensor([i, i * i]), (info.id if info is not None else -1)


class Range(IterableDataset):
    """Iterable: the numbers below n, shared out among the workers by get_worker_info()."""

    def __init__(self, n: int, shard: bool = True):
        self.n, self.shard = n, shard

    def __iter__(self):
        info = get_worker_info()
        if info is None or not self.shard:
            return iter(range(self.n))
        return iter(range(info.id, self.n, info.num_workers))

    def __len__(self):
        return self.n


def test_tensor_subset_concat_chain_stack_datasets():
    x, y = np.arange(12.0).reshape(6, 2), np.arange(6)
    ds = TensorDataset(tp.tensor(x), tp.tensor(y))
    assert len(ds) == 6
    np.testing.assert_array_equal(ds[4][0].numpy(), x[4])
    assert ds[-1][1].item() == 5
    sub = Subset(ds, [5, 0, 3])
    assert len(sub) == 3 and sub[0][1].item() == 5 and [s[1].item() for s in sub.__getitems__([2, 1])] == [3, 0]
    cat = ds + Subset(ds, [1, 2])
    assert isinstance(cat, ConcatDataset) and len(cat) == 8 and cat.cumulative_sizes == [6, 8]
    assert [cat[i][1].item() for i in (0, 5, 6, 7, -1, -8)] == [0, 5, 1, 2, 2, 0]
    with pytest.raises(ValueError, match="should not exceed"):
        cat[-9]
    with pytest.raises(IndexError):
        cat[8]
    chained = Range(3, shard=False) + Range(2, shard=False)
    assert isinstance(chained, ChainDataset) and list(chained) == [0, 1, 2, 0, 1] and len(chained) == 5
    stacked = StackDataset(a=range(3), b=["x", "y", "z"])
    assert stacked[1] == {"a": 1, "b": "y"} and StackDataset(range(2), range(2, 4))[1] == (1, 3)
    assert stacked.__getitems__([2, 0]) == [{"a": 2, "b": "z"}, {"a": 0, "b": "x"}]


def test_dataset_errors_name_the_problem():
    with pytest.raises(ValueError, match="TensorDataset: size mismatch"):
        TensorDataset(tp.zeros(3, 2), tp.zeros(4))
    with pytest.raises(TypeError, match="TensorDataset: argument 1"):
        TensorDataset(tp.zeros(3), np.zeros(3))
    with pytest.raises(ValueError, match="empty"):
        ConcatDataset([])
    with pytest.raises(TypeError, match="IterableDataset"):
        ConcatDataset([Range(3)])
    with pytest.raises(TypeError, match="ChainDataset only supports IterableDataset"):
        list(ChainDataset([Squares(2)]))
    with pytest.raises(ValueError, match="StackDataset: size mismatch"):
        StackDataset(range(2), range(3))


def test_random_split_lengths_as_pytorch_and_repeatable():
    torch = _torch()
    for lengths in ([3, 7], [0.5, 0.3, 0.2], [0.34, 0.33, 0.33], [1.0, 0.0]):
        with pytest.warns(UserWarning, match="Length of split at index 1 is 0") if 0.0 in lengths else nullcontext():
            ours = random_split(range(10), lengths, generator=tp.Generator().manual_seed(1))
        with pytest.warns(UserWarning) if 0.0 in lengths else nullcontext():
            theirs = torch.utils.data.random_split(range(10), lengths, generator=torch.Generator().manual_seed(1))
        assert [len(s) for s in ours] == [len(s) for s in theirs], lengths
        picked = [i for s in ours for i in s]
        assert sorted(picked) == list(range(10))  # disjoint, and together the whole dataset
    again = random_split(range(10), [0.5, 0.3, 0.2], generator=tp.Generator().manual_seed(1))
    assert [list(s) for s in again] == [list(s) for s in random_split(range(10), [5, 3, 2],
                                                                      generator=tp.Generator().manual_seed(1))]
    tp.manual_seed(3)
    first = [list(s) for s in random_split(range(10), [5, 5])]
    tp.manual_seed(3)
    assert first == [list(s) for s in random_split(range(10), [5, 5])]  # the default generator
    for bad in ([3, 3], [0.5, 0.6], [-1, 11]):  # (PyTorch lets the negative length through)
        with pytest.raises(ValueError, match="random_split"):
            random_split(range(10), bad)


# --- samplers ------------------------------------------------------------------------------

def test_deterministic_samplers_match_pytorch():
    torch = _torch()
    tdata = torch.utils.data
    assert list(SequentialSampler(range(5))) == list(tdata.SequentialSampler(range(5)))
    for size, drop in [(2, False), (2, True), (5, False), (7, True)]:
        ours = BatchSampler(SequentialSampler(range(5)), size, drop)
        theirs = tdata.BatchSampler(tdata.SequentialSampler(range(5)), size, drop)
        assert list(ours) == list(theirs) and len(ours) == len(theirs), (size, drop)
    assert list(BatchSampler([4, 1, 3], 2, False)) == [[4, 1], [3]]


def test_random_samplers_are_seeded_permutations():
    g = tp.Generator().manual_seed(7)
    order = list(RandomSampler(range(9), generator=g))
    assert sorted(order) == list(range(9))
    assert list(RandomSampler(range(9), generator=tp.Generator().manual_seed(7))) == order
    assert list(RandomSampler(range(9), generator=g)) != order  # the generator moved on
    longer = list(RandomSampler(range(4), num_samples=10, generator=g))
    assert len(longer) == 10 and sorted(longer[:8]) == [0, 0, 1, 1, 2, 2, 3, 3] and len(set(longer[8:])) == 2
    drawn = list(RandomSampler(range(3), replacement=True, num_samples=50, generator=g))
    assert len(drawn) == 50 and set(drawn) <= {0, 1, 2}
    tp.manual_seed(5)
    first = list(RandomSampler(range(20)))
    tp.manual_seed(5)
    assert list(RandomSampler(range(20))) == first  # without a generator: the default one
    sub = list(SubsetRandomSampler([10, 20, 30, 40], generator=g))
    assert sorted(sub) == [10, 20, 30, 40]
    weighted = WeightedRandomSampler([0.0, 1.0, 0.0, 3.0], 40, generator=g)
    picks = list(weighted)
    assert len(weighted) == 40 and len(picks) == 40 and set(picks) == {1, 3}
    assert sorted(WeightedRandomSampler([1, 1, 1, 0], 3, replacement=False, generator=g)) == [0, 1, 2]


def test_sampler_errors_have_pytorch_types():
    torch = _torch()
    tdata = torch.utils.data
    cases = [
        (lambda m: m.RandomSampler(range(3), num_samples=0), ValueError),
        (lambda m: m.RandomSampler(range(3), replacement=1), TypeError),
        (lambda m: m.BatchSampler(range(3), 0, False), ValueError),
        (lambda m: m.BatchSampler(range(3), True, False), ValueError),
        (lambda m: m.BatchSampler(range(3), 2, 1), ValueError),
        (lambda m: m.WeightedRandomSampler([[1.0, 2.0]], 2), ValueError),
        (lambda m: m.WeightedRandomSampler([1.0, 2.0], -1), ValueError),
    ]
    import tensorplay.utils.data as ours

    for make, error in cases:
        with pytest.raises(error):
            make(tdata)
        with pytest.raises(error):
            make(ours)


# --- collation -----------------------------------------------------------------------------

def _collate_cases(lib):
    arr = np.arange(6, dtype=np.int16).reshape(2, 3)
    return [
        [1.5, 2.0],
        [1, 2, 3],
        [True, False],
        [1, 2.5],  # the first sample's type decides: ints, so PyTorch's inference gives float32
        [np.float32(1), np.float32(2)],
        [np.int32(1), np.int32(2)],
        [arr, arr + 1],
        [np.array(1.0), np.array(2.0)],
        [lib.tensor([1.0, 2.0]), lib.tensor([3.0, 4.0])],
        [lib.tensor([[1, 2]], dtype=lib.int32)] * 3,
        ["a", "b"],
        [b"a", b"b"],
        [(1, 2.0, "s"), (3, 4.0, "t")],
        [[1, 2], [3, 4]],
        [{"img": arr, "label": 1, "meta": {"name": "a"}}, {"img": arr, "label": 0, "meta": {"name": "b"}}],
        [Point(lib.zeros(2), 1.0), Point(lib.ones(2), 2.0)],
        [collections.OrderedDict(b=1, a=2.0)] * 2,
        [[]],
    ]


def test_default_collate_matches_pytorch():
    torch = _torch()
    for ours_in, theirs_in in zip(_collate_cases(tp), _collate_cases(torch)):
        _same(default_collate(ours_in), torch.utils.data.default_collate(theirs_in), repr(theirs_in)[:50])


def test_default_collate_refuses_what_pytorch_refuses():
    torch = _torch()
    tcollate = torch.utils.data.default_collate
    for batch in ([None, None], [object()], [1 + 2j], [np.array(["a"])] * 2):
        with pytest.raises(TypeError, match="default_collate: batch must contain") as ours:
            default_collate(batch)
        with pytest.raises(TypeError) as theirs:
            tcollate(batch)
        assert str(ours.value) == str(theirs.value)
    # mismatched sizes: PyTorch raises RuntimeError; tp.ShapeError is a RuntimeError and a ValueError
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([[1, 2], [3]])
    with pytest.raises(ValueError, match=r"default_collate: stack expects each tensor to be equal size, but got "
                                         r"\[2\] at entry 0 and \[3\] at entry 1"):
        default_collate([tp.zeros(2), tp.zeros(3)])
    with pytest.raises(KeyError, match="lacks the key"):
        default_collate([{"a": 1}, {"b": 2}])


def test_default_convert_matches_pytorch():
    torch = _torch()
    for make in (lambda lib: np.arange(3), lambda lib: (np.float32(1), "s"), lambda lib: [np.array(["a"])],
                 lambda lib: 1.5, lambda lib: np.float64(1.5), lambda lib: {"a": np.zeros(2, np.float32), "b": 1},
                 lambda lib: Point(np.zeros(1), 2), lambda lib: lib.ones(2)):
        _same(default_convert(make(tp)), torch.utils.data.default_convert(make(torch)))
    a = np.arange(3.0)
    shared = default_convert(a)
    a[0] = 9.0
    assert shared[0].item() == 9.0  # as_tensor: no copy, as in PyTorch


# --- DataLoader, one process ---------------------------------------------------------------

def _loader_cases(lib, ds_map, ds_iter):
    tdata = lib.utils.data
    return {
        "batch3": lambda: tdata.DataLoader(ds_map, batch_size=3),
        "drop_last": lambda: tdata.DataLoader(ds_map, batch_size=3, drop_last=True),
        "unbatched": lambda: tdata.DataLoader(ds_map, batch_size=None),
        "sampler": lambda: tdata.DataLoader(ds_map, batch_size=2, sampler=[6, 1, 4, 0]),
        "batch_sampler": lambda: tdata.DataLoader(ds_map, batch_sampler=[[0, 2], [5, 3, 1]]),
        "collate_fn": lambda: tdata.DataLoader(ds_map, batch_size=4, collate_fn=lambda b: len(b)),
        "iterable": lambda: tdata.DataLoader(ds_iter, batch_size=3),
        "iterable_drop": lambda: tdata.DataLoader(ds_iter, batch_size=3, drop_last=True),
        "iterable_unbatched": lambda: tdata.DataLoader(ds_iter, batch_size=None),
    }


class _TorchRange:
    """Range for PyTorch: the same stream from torch's IterableDataset."""

    @staticmethod
    def make(n):
        torch = _torch()

        class R(torch.utils.data.IterableDataset):
            def __iter__(self):
                return iter(range(n))

            def __len__(self):
                return n

        return R()


def test_loader_batches_match_pytorch():
    torch = _torch()
    x = np.arange(14.0, dtype=np.float32).reshape(7, 2)
    ours = _loader_cases(tp, TensorDataset(tp.tensor(x), tp.arange(7)), Range(7))
    theirs = _loader_cases(torch, torch.utils.data.TensorDataset(torch.tensor(x), torch.arange(7)),
                           _TorchRange.make(7))
    for name in ours:
        o, t = ours[name](), theirs[name]()
        assert len(o) == len(t), name
        _same(list(o), list(t), name)
        _same(list(o), list(t), name + " (second epoch)")


def test_shuffled_epochs_are_seeded_permutations():
    ds = TensorDataset(tp.arange(10))
    loader = DataLoader(ds, batch_size=4, shuffle=True, generator=tp.Generator().manual_seed(0))
    epochs = [[int(v) for (b,) in loader for v in b.tolist()] for _ in range(3)]
    assert all(sorted(e) == list(range(10)) for e in epochs)
    assert [len(b) for (b,) in loader] == [4, 4, 2]
    assert epochs[0] != epochs[1]
    again = DataLoader(ds, batch_size=4, shuffle=True, generator=tp.Generator().manual_seed(0))
    assert [[int(v) for (b,) in again for v in b.tolist()] for _ in range(3)] == epochs


def test_bad_loader_options_raise_as_pytorch():
    torch = _torch()
    cases = [
        {"shuffle": True, "sampler": [0, 1]},
        {"batch_sampler": [[0]], "batch_size": 2},
        {"batch_sampler": [[0]], "shuffle": True},
        {"batch_sampler": [[0]], "drop_last": True},
        {"batch_size": None, "drop_last": True},
        {"num_workers": -1},
        {"timeout": -1},
        {"prefetch_factor": 2},
        {"persistent_workers": True},
        {"multiprocessing_context": "fork"},
        {"num_workers": 1, "multiprocessing_context": "no-such-method"},
    ]
    for kwargs in cases:
        with pytest.raises(ValueError) as theirs:
            torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.zeros(2)), **kwargs)
        with pytest.raises(ValueError) as ours:
            DataLoader(TensorDataset(tp.zeros(2)), **kwargs)
        assert ours.value.args[0].removeprefix("DataLoader: ")[:18] == theirs.value.args[0][:18], kwargs
    for kwargs in ({"shuffle": True}, {"sampler": [0]}, {"batch_sampler": [[0]]}):
        with pytest.raises(ValueError, match="DataLoader with IterableDataset: expected unspecified"):
            DataLoader(Range(3), **kwargs)
    loader = DataLoader(Squares(3))
    with pytest.raises(ValueError, match="batch_size attribute should not be set after DataLoader is initialized"):
        loader.batch_size = 2
    loader.num_workers = 0  # (other attributes may change)


SCRIPT = """
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset, random_split


class Pairs(Dataset[tuple]):
    def __init__(self, n):
        self.x = torch.randn(n, 3)
        self.y = (self.x.sum(1) > 0).long()

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


train, val = random_split(Pairs(20), [0.75, 0.25], generator=torch.Generator().manual_seed(42))
loader = DataLoader(train, batch_size=4, shuffle=True, drop_last=True)
seen = [(x.shape, y.dtype) for x, y in loader]
assert len(seen) == len(loader) == 3 and seen[0] == (torch.Size([4, 3]), torch.int64)
assert len(val) == 5 and len(torch.utils.data.DataLoader(TensorDataset(torch.zeros(5)), batch_size=2)) == 3
"""


def test_pytorch_data_code_runs_with_only_the_imports_changed():
    swapped = (SCRIPT.replace("import torch\n", "import tensorplay as torch\n")
               .replace("from torch.utils.data import", "from tensorplay.utils.data import"))
    assert sum(a != b for a, b in zip(SCRIPT.splitlines(), swapped.splitlines())) == 2
    exec(compile(swapped, "<swapped script>", "exec"), {})  # noqa: S102
    _torch()
    exec(compile(SCRIPT, "<pytorch script>", "exec"), {})  # noqa: S102 - and the script is PyTorch's


@pytest.mark.iree  # (from its third step on, the optimizer updates through a compiled program)
@pytest.mark.parametrize("workers", [0, 2])
def test_training_loop_over_a_loader_matches_pytorch(workers):
    torch = _torch()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((24, 3)).astype(np.float32)
    y = (x @ np.array([[1.5], [-2.0], [0.5]], np.float32) + 0.3).astype(np.float32)
    order = rng.permutation(24).tolist()  # an explicit sampler: the same batches on both sides

    def train(lib, model):
        data = lib.utils.data
        loader = data.DataLoader(data.TensorDataset(lib.tensor(x), lib.tensor(y)), batch_size=5, sampler=order,
                                 num_workers=workers, persistent_workers=workers > 0)
        opt = lib.optim.SGD(model.parameters(), lr=0.1)
        losses = []
        for _ in range(3):
            for xb, yb in loader:
                opt.zero_grad()
                loss = lib.nn.functional.mse_loss(model(xb), yb)
                loss.backward()
                opt.step()
                losses.append(loss.item())
        return losses

    theirs_model = torch.nn.Linear(3, 1)
    ours_model = tp.nn.Linear(3, 1)
    ours_model.load_state_dict({k: v.detach().numpy() for k, v in theirs_model.state_dict().items()})
    ours, theirs = train(tp, ours_model), train(torch, theirs_model)
    assert ours[-1] < 0.1 * ours[0]
    # float32 through 15 steps of the same arithmetic: measured 3.5e-7 relative on the losses
    # (a few ulps, from reduction order), the weights equal
    np.testing.assert_allclose(ours, theirs, rtol=2e-6, atol=0)
    np.testing.assert_allclose(ours_model.weight.detach().numpy(), theirs_model.weight.detach().numpy(),
                               rtol=2e-6, atol=1e-7)


# --- worker processes ----------------------------------------------------------------------

def _record_worker(worker_id):
    info = get_worker_info()
    assert info.id == worker_id and info.num_workers == 2 and isinstance(info.dataset, Squares)
    info.dataset.n = 6  # this worker's own copy (checked below: the loader's dataset keeps 11)
    os.environ["TP_TEST_WORKER_SEED"] = str(info.seed)


class SeedReport(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        info = get_worker_info()
        return info.id, info.seed, int(os.environ["TP_TEST_WORKER_SEED"]), float(tp.rand(()).item())


def _seed_env(worker_id):
    os.environ["TP_TEST_WORKER_SEED"] = str(get_worker_info().seed)


def test_two_workers_give_single_process_batches_in_order():
    assert get_worker_info() is None
    ds = Squares(11)
    single = list(DataLoader(ds, batch_size=2))
    multi = list(DataLoader(ds, batch_size=2, num_workers=2, worker_init_fn=_record_worker))
    assert len(multi) == len(single) == 6
    for (xo, wo), (xs, ws) in zip(multi, single):
        np.testing.assert_array_equal(xo.numpy(), xs.numpy())
        assert ws.tolist() == [-1] * len(ws)
    # batches alternate between the workers, in order: worker 0 loads batches 0, 2, 4
    assert [w.tolist()[0] for _, w in multi] == [0, 1, 0, 1, 0, 1]
    assert ds.n == 11  # the workers changed their copies only
    # seeds: base seed (drawn from the loader's generator) + worker id, as in PyTorch
    report = list(DataLoader(SeedReport(), batch_size=None, num_workers=2, worker_init_fn=_seed_env,
                             generator=tp.Generator().manual_seed(3)))
    (id0, seed0, env0, r0), (id1, seed1, env1, _) = report[0], report[1]
    assert (id0, id1) == (0, 1) and seed1 == seed0 + 1 and (env0, env1) == (seed0, seed1)
    base = int(tp.randint(0, 2 ** 63 - 1, (), generator=tp.Generator().manual_seed(3)).item())
    assert seed0 == base
    assert r0 == float(tp.rand((), generator=tp.Generator().manual_seed(seed0)).item())  # tp seeded per worker
    again = list(DataLoader(SeedReport(), batch_size=None, num_workers=2, worker_init_fn=_seed_env,
                            generator=tp.Generator().manual_seed(3), in_order=False))
    assert sorted(again) == sorted(report)  # the same seeds and draws; in_order=False: in any order


def test_iterable_dataset_in_workers_and_persistent_workers():
    loader = DataLoader(Range(9), batch_size=2, num_workers=2, persistent_workers=True)
    first = [b.tolist() for b in loader]
    # worker 0 yields 0 2 4 6 8, worker 1 yields 1 3 5 7; batches alternate until one runs out
    assert first == [[0, 2], [1, 3], [4, 6], [5, 7], [8]]
    pids = [w.pid for w in loader._iterator._workers]
    it = iter(loader)
    assert next(it).tolist() == [0, 2]  # a new epoch, and a break in the middle of it
    assert [b.tolist() for b in loader] == first
    workers = loader._iterator._workers
    assert [w.pid for w in workers] == pids and all(w.is_alive() for w in workers)  # the same processes
    del loader, it
    gc.collect()
    assert all(w.exitcode is not None for w in workers)  # the loader gone: the workers ended


def test_worker_exception_reraised_with_its_traceback():
    # (the fork start method: these workers run only eager host code)
    loader = DataLoader(Squares(10, fail_at=7), batch_size=2, num_workers=2, multiprocessing_context="fork")
    it = iter(loader)
    with pytest.raises(ValueError, match="sample 7 is corrupt") as info:
        for _ in it:
            pass
    text = str(info.value)
    assert text.startswith("Caught ValueError in DataLoader worker process 1.\nOriginal Traceback")
    assert "in __getitem__" in text and 'raise ValueError(f"sample {i} is corrupt")' in text
    assert all(w.exitcode is not None for w in it._workers)  # shut down, none left running


def test_early_break_stops_the_workers():
    loader = DataLoader(Squares(1000), batch_size=1, num_workers=2, prefetch_factor=4)
    it = iter(loader)
    next(it)
    workers = it._workers
    assert all(w.is_alive() for w in workers)
    del it
    gc.collect()
    assert all(w.exitcode is not None for w in workers)
    with pytest.raises(TypeError, match="by pickling"):
        iter(DataLoader(Squares(3), num_workers=1, collate_fn=lambda b: b))


def test_workers_fork_while_torch_is_tensorplay():
    # a script run with torch resolved to tensorplay (tensorplay.run) cannot be imported again
    # in a fresh process, so its workers are forked
    alias = pytest.importorskip("tensorplay._torch_alias")
    with alias.torch_alias():
        it = iter(DataLoader(Squares(4), batch_size=2, num_workers=1))
        assert it._start_method == "fork"
        assert [x[:, 1].tolist() for x, _ in it] == [[0, 1], [4, 9]]
    assert iter(DataLoader(Squares(4), num_workers=1))._start_method != "fork"
