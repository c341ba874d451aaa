"""Shape cases: reshape and views, permutations, squeeze/unsqueeze, flatten, broadcasting,
cat/stack, split/chunk/unbind/narrow, movedim, flip, repeat and tile."""

from __future__ import annotations

import math

import numpy as np

import tensorplay as tp
from tensorplay._dispatch import apply
from tests.opinfo import ALL_DTYPES, ErrorCase, OpInfo, Sample, make_arg


def _each(*specs):
    """Samples from ``(input shape, extra args..., desc)`` tuples: the input is random data of
    the case's dtype, the extra arguments pass through unchanged."""

    def samples(rng, dtype):
        return [Sample((make_arg(rng, spec[0], dtype),) + tuple(spec[1:-1]), desc=spec[-1])
                for spec in specs]

    return samples


def _op(name, fn, ref, *specs, dtypes=ALL_DTYPES, **kw):
    return OpInfo(name, fn, ref, _each(*specs), dtypes=dtypes, **kw)


# --- independent numpy expectations ---------------------------------------------------------

def _resolve(shape, size):
    shape = list(shape)
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        shape[shape.index(-1)] = size // known
    return tuple(shape)


def _squeeze_ref(a, dim=None):
    if dim is None:
        dims = range(a.ndim)
    else:
        dims = [d % max(a.ndim, 1) for d in (dim if isinstance(dim, tuple) else (dim,))]
    return a.reshape([s for i, s in enumerate(a.shape) if not (i in dims and s == 1)])


def _flatten_ref(a, start=0, end=-1):
    if a.ndim == 0:
        return a.reshape(1)
    start, end = start % a.ndim, end % a.ndim
    return a.reshape(a.shape[:start] + (math.prod(a.shape[start:end + 1]),) + a.shape[end + 1:])


def _expand_ref(a, sizes):
    lead = len(sizes) - a.ndim
    target = [a.shape[i - lead] if s == -1 else s for i, s in enumerate(sizes)]
    return np.broadcast_to(a, target)


def _split_ref(a, size_or_sections, dim=0):
    n = a.shape[dim]
    if isinstance(size_or_sections, int):
        sizes = [min(size_or_sections, n - s) for s in range(0, n, size_or_sections)] if n else [0]
    else:
        sizes = list(size_or_sections)
    return tuple(np.split(a, np.cumsum(sizes)[:-1], axis=dim))


def _chunk_ref(a, chunks, dim=0):
    n = a.shape[dim]
    if n == 0:
        return tuple(a for _ in range(chunks))
    return _split_ref(a, -(-n // chunks), dim)


def _unbind_ref(a, dim=0):
    return tuple(np.take(a, i, axis=dim) for i in range(a.shape[dim]))


def _narrow_ref(a, dim, start, length):
    start = start % a.shape[dim] if start < 0 else start
    return np.take(a, np.arange(start, start + length), axis=dim)


def _transpose_ref(a, d0, d1):
    return np.swapaxes(a, d0, d1) if a.ndim else a


def _t_ref(a):
    return a.T


# --- cat / stack samples (several inputs) -----------------------------------------------------

def _cat_samples(rng, dtype):
    x = lambda *s: make_arg(rng, s, dtype)  # noqa: E731
    return [
        Sample((x(2, 3), x(4, 3)), desc="dim 0"),
        Sample((x(2, 3), x(2, 1), x(2, 0)), {"dim": 1}, desc="dim 1 with an empty part"),
        Sample((x(2, 3, 4), x(2, 3, 2)), {"dim": -1}, desc="dim -1"),
        Sample((x(2, 3),), desc="one tensor"),
        Sample((x(0, 3), x(0, 3)), desc="all empty"),
        Sample((x(2, 3), np.zeros((0,), dtype.np_dtype)), desc="legacy 1-d empty skipped"),
    ]


def _cat_promotion_samples(rng, dtype):
    return [
        Sample((make_arg(rng, (2, 3), dtype), make_arg(rng, (1, 3), tp.int32)), desc="with int32"),
        Sample((make_arg(rng, (2,), tp.bool), make_arg(rng, (3,), dtype)), desc="bool first"),
        Sample((make_arg(rng, (2, 2), dtype), make_arg(rng, (2, 1), tp.float64)), {"dim": 1},
               desc="with f64"),
    ]


def _stack_samples(rng, dtype):
    x = lambda *s: make_arg(rng, s, dtype)  # noqa: E731
    return [
        Sample((x(2, 3), x(2, 3), x(2, 3)), desc="dim 0"),
        Sample((x(2, 3), x(2, 3)), {"dim": 2}, desc="new last dim"),
        Sample((x(2, 3), x(2, 3)), {"dim": -2}, desc="dim -2"),
        Sample((x(), x()), desc="0-d"),
        Sample((x(0, 2), x(0, 2)), {"dim": 1}, desc="empty"),
    ]


def _cat_ref(*tensors, dim=0):
    parts = [np.asarray(t) for t in tensors]
    dtype = np.result_type(*parts)
    kept = [p for p in parts if p.shape != (0,)] or parts[:1]
    return np.concatenate([p.astype(dtype) for p in kept], axis=dim)


def _broadcast_samples(rng, dtype):
    return [
        Sample((make_arg(rng, (3, 1), dtype), make_arg(rng, (4,), dtype)), desc="2-d with 1-d"),
        Sample((make_arg(rng, (), dtype), make_arg(rng, (2, 0), dtype)), desc="0-d with empty"),
        Sample((make_arg(rng, (2, 1, 3), dtype), make_arg(rng, (5, 1), dtype),
                make_arg(rng, (1,), dtype)), desc="three tensors"),
    ]


OPS = [
    _op("reshape", lambda lib, a, s: a.reshape(s), lambda a, s: a.reshape(s),
        ((2, 3, 4), (4, 6), "3-d to 2-d"), ((2, 3, 4), (-1,), "-1"), ((2, 3, 4), (2, -1, 3), "inner -1"),
        ((0, 3), (3, 0, 2), "empty"), ((0, 3), (-1, 3), "empty with -1"), ((), (1, 1), "0-d up"),
        ((1, 1), (), "to 0-d")),
    _op("reshape_varargs", lambda lib, a, s: lib.reshape(a, s) if isinstance(s, tuple) else a.reshape(*s),
        lambda a, s: a.reshape(s), ((2, 6), [3, 4], "method varargs"), ((2, 6), (12,), "function tuple")),
    _op("view", lambda lib, a, s: a.view(*s), lambda a, s: a.reshape(s),
        ((4, 5), (2, 10), "2-d"), ((4, 5), (-1, 2, 2), "-1"), ((3,), (3, 1), "add dim")),
    _op("view_as", lambda lib, a, b: a.view_as(lib.zeros(b)), lambda a, b: a.reshape(b),
        ((2, 3), (6, 1), "to 6x1"), ((0, 2), (2, 0), "empty")),
    _op("reshape_as", lambda lib, a, b: a.reshape_as(lib.zeros(b)), lambda a, b: a.reshape(b),
        ((2, 3), (3, 2), "to 3x2")),
    _op("permute", lambda lib, a, d: a.permute(*d) if d else a.permute(d), lambda a, d: np.transpose(a, d),
        ((2, 3, 4), (2, 0, 1), "3-d"), ((2, 3, 4), (-1, 0, -2), "negative dims"),
        ((0, 3), (1, 0), "empty"), ((), (), "0-d")),
    _op("permute_tuple", lambda lib, a, d: lib.permute(a, d), lambda a, d: np.transpose(a, d),
        ((2, 3, 4, 1), (3, 1, 0, 2), "4-d")),
    _op("transpose", lambda lib, a, d0, d1: lib.transpose(a, d0, d1), _transpose_ref,
        ((2, 3, 4), 0, 2, "0 and 2"), ((2, 3, 4), -1, 1, "negative"), ((3, 3), 1, 1, "same dim"),
        ((), 0, -1, "0-d")),
    _op("swapaxes", lambda lib, a, d0, d1: a.swapaxes(d0, d1), _transpose_ref, ((2, 5), 0, 1, "2-d")),
    _op("swapdims", lambda lib, a, d0, d1: lib.swapdims(a, d0, d1), _transpose_ref, ((2, 5, 3), -1, 0, "3-d")),
    _op("t", lambda lib, a: a.t(), _t_ref, ((2, 3), "2-d"), ((4,), "1-d"), ((), "0-d"), ((0, 2), "empty")),
    _op("T_property", lambda lib, a: a.T, lambda a: np.transpose(a), ((2, 3), "2-d"), ((0, 3), "empty")),
    _op("mT_property", lambda lib, a: a.mT, lambda a: np.swapaxes(a, -1, -2), ((2, 3, 4), "batched")),
    _op("unsqueeze", lambda lib, a, d: a.unsqueeze(d), lambda a, d: np.expand_dims(a, d),
        ((2, 3), 0, "front"), ((2, 3), 2, "back"), ((2, 3), -1, "-1"), ((2, 3), -3, "-3"), ((), 0, "0-d"),
        ((0, 3), 1, "empty")),
    _op("squeeze_all", lambda lib, a: a.squeeze(), _squeeze_ref,
        ((1, 3, 1, 2), "two ones"), ((1, 1), "all ones"), ((), "0-d"), ((0, 1), "empty")),
    _op("squeeze_dim", lambda lib, a, d: lib.squeeze(a, d), _squeeze_ref,
        ((1, 3, 1), 0, "size 1"), ((1, 3, 1), 1, "not size 1 stays"), ((1, 3, 1), -1, "-1"),
        ((1, 3, 1), (0, 2), "tuple"), ((1, 3, 1), (0, 1), "tuple with non-1"), ((), 0, "0-d")),
    _op("flatten", lambda lib, a, *se: a.flatten(*se), _flatten_ref,
        ((2, 3, 4), "all"), ((2, 3, 4), 1, "from 1"), ((2, 3, 4), 0, 1, "0 to 1"),
        ((2, 3, 4, 5), -3, -2, "negative"), ((2, 3), 1, 1, "one dim"), ((), "0-d"), ((2, 0, 3), 1, "empty")),
    _op("ravel", lambda lib, a: lib.ravel(a), lambda a: a.reshape(-1), ((3, 4), "2-d"), ((), "0-d")),
    _op("unflatten", lambda lib, a, d, s: a.unflatten(d, s),
        lambda a, d, s: a.reshape(a.shape[:d % a.ndim] + _resolve(s, a.shape[d]) + a.shape[d % a.ndim + 1:]),
        ((2, 12), 1, (3, 4), "dim 1"), ((2, 12), -1, (-1, 6), "inferred"), ((6, 2), 0, (1, 6), "leading 1"),
        ((0, 4), 1, (2, 2), "empty")),
    _op("expand", lambda lib, a, s: a.expand(*s), _expand_ref,
        ((3, 1), (3, 4), "stretch"), ((3, 1), (2, -1, 5), "new lead and -1"), ((), (2, 3), "0-d"),
        ((2, 1), (2, 0), "to empty"), ((1,), (1,), "same")),
    _op("expand_tuple", lambda lib, a, s: a.expand(s), _expand_ref, ((1, 4), (3, 4), "tuple")),
    _op("expand_as", lambda lib, a, s: a.expand_as(lib.zeros(s)), lambda a, s: np.broadcast_to(a, s),
        ((4, 1), (2, 4, 3), "3-d")),
    _op("broadcast_to", lambda lib, a, s: lib.broadcast_to(a, s), _expand_ref,
        ((3,), (2, 3), "1-d to 2-d"), ((2, 1), (-1, 4), "-1 keeps"), ((1, 0), (3, 0), "empty")),
    OpInfo("broadcast_tensors", lambda lib, *xs: lib.broadcast_tensors(*xs),
           lambda *xs: tuple(np.broadcast_arrays(*xs)), _broadcast_samples, dtypes=ALL_DTYPES),
    OpInfo("broadcast_shapes", lambda lib, *shapes: lib.broadcast_shapes(*shapes),
           lambda *shapes: np.broadcast_shapes(*[(s,) if isinstance(s, int) else s for s in shapes]),
           lambda rng, d: [Sample(((3, 1), (4,)), desc="two"), Sample(((2, 1, 1), 5, ()), desc="int and ()"),
                           Sample(((0, 1), (1, 3)), desc="empty")], dtypes=(tp.float32,)),
    OpInfo("cat", lambda lib, *ts, dim=0: lib.cat(ts, dim), _cat_ref, _cat_samples, dtypes=ALL_DTYPES),
    OpInfo("concat_alias", lambda lib, *ts, dim=0: lib.concat(list(ts), dim=dim), _cat_ref,
           _cat_samples, dtypes=(tp.float32, tp.int64)),
    OpInfo("concatenate_axis", lambda lib, *ts, dim=0: lib.concatenate(ts, axis=dim), _cat_ref,
           _cat_samples, dtypes=(tp.float32,)),
    OpInfo("cat_promotion", lambda lib, *ts, dim=0: lib.cat(ts, dim=dim), _cat_ref, _cat_promotion_samples,
           dtypes=ALL_DTYPES),
    OpInfo("stack", lambda lib, *ts, dim=0: lib.stack(ts, dim), lambda *ts, dim=0: np.stack(ts, axis=dim),
           _stack_samples, dtypes=ALL_DTYPES),
    _op("split", lambda lib, a, s, *d: a.split(s, *d), _split_ref,
        ((5, 4), 2, "uneven"), ((5, 4), 2, 1, "dim 1"), ((5, 4), [1, 4], "sizes"),
        ((5, 4), (2, 0, 3), "zero part"), ((5, 4), 5, "one piece"), ((5, 4), 7, "larger than dim"),
        ((0, 3), 2, "empty"), ((0, 3), 0, "empty by 0"),
        ((2, 6), [3, 3], -1, "negative dim")),
    _op("split_function", lambda lib, a, s, d: lib.split(a, s, dim=d), _split_ref,
        ((4, 6), 4, 1, "dim kwarg")),
    _op("chunk", lambda lib, a, c, *d: a.chunk(c, *d), _chunk_ref,
        ((6,), 4, "fewer pieces"), ((6,), 3, "even"), ((5, 6), 4, 1, "dim 1"), ((7, 2), 3, "uneven"),
        ((0, 3), 2, "empty")),
    _op("unbind", lambda lib, a, *d: a.unbind(*d), _unbind_ref,
        ((3, 4), "dim 0"), ((3, 4), 1, "dim 1"), ((2, 3, 2), -1, "-1"), ((0, 2), "empty")),
    _op("iterate", lambda lib, a: tuple(a), lambda a: tuple(a[i] for i in range(len(a))), ((3, 2), "rows")),
    _op("narrow", lambda lib, a, d, s, n: a.narrow(d, s, n), _narrow_ref,
        ((5, 3), 0, 1, 3, "dim 0"), ((5, 3), 1, -2, 2, "negative start"), ((5, 3), -1, 0, 0, "empty"),
        ((5, 3), 0, 5, 0, "start at end")),
    _op("movedim", lambda lib, a, s, d: lib.movedim(a, s, d), lambda a, s, d: np.moveaxis(a, s, d),
        ((2, 3, 4), 0, -1, "int"), ((2, 3, 4), (0, 1), (2, 0), "tuples"),
        ((2, 3, 4, 5), (-1,), (0,), "1-tuple"),
        ((2, 3), 1, 1, "no move")),
    _op("moveaxis", lambda lib, a, s, d: lib.moveaxis(a, s, d),
        lambda a, s, d: np.moveaxis(a, s, d), ((2, 3, 4), 2, 0, "last to front")),
    _op("flip", lambda lib, a, d: a.flip(d), lambda a, d: np.flip(a, d),
        ((3, 4), 0, "dim 0"), ((3, 4), (0, 1), "both"), ((2, 3, 4), (-1, 0), "negative"),
        ((0, 2), (1,), "empty"),
        ((3, 4), (), "no dims")),
    _op("flip_varargs", lambda lib, a: a.flip(1, 0), lambda a: np.flip(a, (0, 1)), ((2, 5), "two")),
    _op("repeat", lambda lib, a, r: a.repeat(*r), lambda a, r: np.tile(a, r),
        ((2, 3), (2, 1), "same rank"), ((2, 3), (2, 1, 3), "new lead"), ((3,), (0, 2), "zero repeat"),
        ((), (3,), "0-d"), ((2, 1), (1, 1), "ones"), ((0, 2), (2, 2), "empty")),
    _op("repeat_tuple", lambda lib, a, r: a.repeat(r), lambda a, r: np.tile(a, r), ((2, 2), (3, 2), "tuple")),
    _op("tile", lambda lib, a, r: lib.tile(a, r), lambda a, r: np.tile(a, r),
        ((2, 3), (2,), "fewer dims"), ((2, 3), (2, 1, 2), "more dims"), ((), (2,), "0-d"),
        ((2, 3), (), "empty reps")),
]


def _error(name, fn, exc, match):
    return ErrorCase(name, fn, exc, match)


ERRORS = [
    _error("reshape_numel_mismatch", lambda lib: lib.zeros(2, 3).reshape(2, 5), RuntimeError,
           r"tp\.reshape: shape '\[2, 5\]' is invalid for input of size 6"),
    _error("reshape_inferred_not_divisible", lambda lib: lib.zeros(2, 3).reshape(4, -1), RuntimeError,
           r"shape '\[4, -1\]' is invalid for input of size 6"),
    _error("reshape_two_inferred", lambda lib: lib.zeros(6).reshape(-1, -1), RuntimeError,
           r"only one dimension can be inferred"),
    _error("reshape_negative_size", lambda lib: lib.zeros(6).reshape(-2, 3), RuntimeError,
           r"invalid shape dimension -2 at index 0 of shape \[-2, 3\]"),
    _error("reshape_empty_ambiguous", lambda lib: lib.zeros(0, 3).reshape(-1, 0), RuntimeError,
           r"cannot reshape tensor of 0 elements into shape \[-1, 0\] because the unspecified dimension"),
    _error("reshape_float_size", lambda lib: lib.zeros(6).reshape(2.0, 3), TypeError,
           r"reshape\(\): argument 'shape' must be a sequence of ints"),
    _error("view_as_numel_mismatch", lambda lib: lib.zeros(5, 6).view_as(lib.zeros(31)), RuntimeError,
           r"shape '\[31\]' is invalid for input of size 30"),
    _error("permute_duplicate_dims", lambda lib: lib.zeros(2, 3).permute(0, 0), RuntimeError,
           r"tp\.permute: duplicate dims are not allowed"),
    _error("permute_wrong_length", lambda lib: lib.zeros(2, 3).permute(0), RuntimeError,
           r"input\.dim\(\) = 2 is not equal to len\(dims\) = 1"),
    _error("permute_dim_out_of_range", lambda lib: lib.zeros(2, 3).permute(0, 2), IndexError,
           r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"),
    _error("transpose_dim_out_of_range", lambda lib: lib.zeros(2, 3).transpose(0, 2), IndexError,
           r"transpose: Dimension out of range"),
    _error("t_of_3d", lambda lib: lib.zeros(2, 3, 4).t(), RuntimeError,
           r"t\(\) expects a tensor with <= 2 dimensions, but self is 3D"),
    _error("unsqueeze_dim_out_of_range", lambda lib: lib.zeros(2, 3).unsqueeze(3), IndexError,
           r"expected to be in range of \[-3, 2\], but got 3"),
    _error("squeeze_repeated_dims", lambda lib: lib.zeros(1, 3).squeeze((0, 0)), RuntimeError,
           r"dim \[0, 0\] appears multiple times"),
    _error("squeeze_dim_out_of_range", lambda lib: lib.zeros(1, 3).squeeze(2), IndexError,
           r"Dimension out of range"),
    _error("flatten_start_after_end", lambda lib: lib.zeros(2, 3, 4).flatten(2, 1), RuntimeError,
           r"flatten\(\) has invalid args: start_dim cannot come after end_dim"),
    _error("unflatten_bad_product", lambda lib: lib.zeros(2, 12).unflatten(1, (5, 4)), RuntimeError,
           r"unflatten: Provided sizes \[5, 4\] don't multiply up to the size of dim 1 \(12\)"),
    _error("unflatten_empty_sizes", lambda lib: lib.zeros(2, 12).unflatten(1, ()), RuntimeError,
           r"unflatten: sizes must be non-empty"),
    _error("expand_incompatible", lambda lib: lib.zeros(2, 3).expand(3, 3), RuntimeError,
           r"tp\.broadcast_to: The expanded size of the tensor \(3\) must match the existing size \(2\) at "
           r"non-singleton dimension 0\.  Target sizes: \[3, 3\]\.  Tensor sizes: \[2, 3\]"),
    _error("expand_too_few_sizes", lambda lib: lib.zeros(2, 3).expand(3), RuntimeError,
           r"the number of sizes provided \(1\) must be greater or equal to the number of dimensions "
           r"in the tensor \(2\)"),
    _error("expand_minus_one_in_new_dim", lambda lib: lib.zeros(2, 3).expand(-1, 2, 3), RuntimeError,
           r"The expanded size of the tensor \(-1\) isn't allowed in a leading, non-existing dimension 0"),
    _error("broadcast_to_incompatible", lambda lib: lib.broadcast_to(lib.zeros(2, 3), (3, 3)), RuntimeError,
           r"must match the existing size \(2\)"),
    _error("broadcast_tensors_incompatible",
           lambda lib: lib.broadcast_tensors(lib.zeros(2, 3), lib.zeros(4)), RuntimeError,
           r"The size of tensor a \(3\) must match the size of tensor b \(4\) at non-singleton dimension 1"),
    _error("cat_size_mismatch", lambda lib: lib.cat([lib.zeros(2, 3), lib.zeros(2, 4)]), RuntimeError,
           r"tp\.concat: Sizes of tensors must match except in dimension 0\. Expected size 3 but got size 4 "
           r"for tensor number 1 in the list\."),
    _error("cat_rank_mismatch", lambda lib: lib.cat([lib.zeros(2, 3), lib.zeros(2, 3, 1)]), RuntimeError,
           r"Tensors must have same number of dimensions: got 2 and 3"),
    _error("cat_zero_dim", lambda lib: lib.cat([lib.tensor(1.0)]), RuntimeError,
           r"zero-dimensional tensor \(at position 0\) cannot be concatenated"),
    _error("cat_empty_list", lambda lib: lib.cat([]), ValueError,
           r"cat\(\): expected a non-empty list of Tensors"),
    _error("cat_dim_out_of_range", lambda lib: lib.cat([lib.zeros(2, 3)], dim=2), IndexError,
           r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"),
    _error("cat_non_tensor", lambda lib: lib.cat([lib.zeros(2), 3]), TypeError,
           r"expected Tensor as element 1 in argument 0, but got int"),
    _error("stack_shape_mismatch", lambda lib: lib.stack([lib.zeros(2, 3), lib.zeros(3, 2)]), RuntimeError,
           r"stack expects each tensor to be equal size, but got \[2, 3\] at entry 0 and \[3, 2\] at "
           r"entry 1"),
    _error("stack_empty", lambda lib: lib.stack([]), RuntimeError, r"stack expects a non-empty TensorList"),
    _error("stack_dim_out_of_range", lambda lib: lib.stack([lib.zeros(2)], 2), IndexError,
           r"Dimension out of range"),
    _error("split_sizes_bad_sum", lambda lib: lib.zeros(5, 2).split([1, 3]), RuntimeError,
           r"split_with_sizes expects split_sizes to sum exactly to 5 \(input tensor's size at "
           r"dimension 0\), but got split_sizes=\[1, 3\]"),
    _error("split_zero_size", lambda lib: lib.zeros(5).split(0), RuntimeError,
           r"split_size can only be 0 if dimension size is 0, but got dimension size of 5"),
    _error("split_negative_size", lambda lib: lib.zeros(5).split(-1), RuntimeError,
           r"split expects split_size be non-negative, but got split_size=-1"),
    _error("chunk_zero_chunks", lambda lib: lib.zeros(5).chunk(0), RuntimeError,
           r"chunk expects `chunks` to be greater than 0, got: 0"),
    _error("unbind_0d", lambda lib: lib.tensor(1.0).unbind(), IndexError,
           r"Dimension specified as 0 but tensor has no dimensions"),
    _error("narrow_past_end", lambda lib: lib.zeros(5, 6).narrow(0, 4, 2), RuntimeError,
           r"start \(4\) \+ length \(2\) exceeds dimension size \(5\)\."),
    _error("narrow_start_out_of_range", lambda lib: lib.zeros(5).narrow(0, 6, 0), IndexError,
           r"start out of range \(expected to be in range of \[-5, 5\], but got 6\)"),
    _error("narrow_negative_length", lambda lib: lib.zeros(5).narrow(0, 0, -1), RuntimeError,
           r"narrow\(\): length must be non-negative\."),
    _error("movedim_length_mismatch", lambda lib: lib.zeros(2, 3, 4).movedim((0, 1), (2,)), RuntimeError,
           r"movedim: Invalid source or destination dims: source \(\[0, 1\] dims\) should contain the same "
           r"number of dims as destination \(\[2\] dims\)"),
    _error("movedim_repeated_source", lambda lib: lib.zeros(2, 3, 4).movedim((0, 0), (2, 1)), RuntimeError,
           r"movedim: repeated dim in `source` \(\[0, 0\]\)"),
    _error("flip_repeated_dim", lambda lib: lib.zeros(2, 3).flip((0, 0)), RuntimeError,
           r"tp\.flip: dim 0 appears multiple times in the list of dims"),
    _error("flip_dim_out_of_range", lambda lib: lib.zeros(2, 3).flip(2), IndexError,
           r"tp\.flip: Dimension out of range"),
    _error("repeat_too_few", lambda lib: lib.zeros(2, 3).repeat(2), RuntimeError,
           r"Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor"),
    _error("repeat_negative", lambda lib: lib.zeros(5, 6).repeat(-1, 3), RuntimeError,
           r"Trying to create tensor with negative dimension -5: \[-5, 18\]"),
    _error("slice_op_nonpositive_step",
           lambda lib: apply("tp.slice", lib.zeros(4), starts=(0,), ends=(4,), steps=(0,)),
           ValueError, r"tp\.slice: step must be greater than zero, got 0"),
    _error("slice_op_wrong_rank",
           lambda lib: apply("tp.slice", lib.zeros(4), starts=(0, 0), ends=(4, 4), steps=(1, 1)),
           ValueError, r"tp\.slice: 'starts' has 2 entries for a tensor of rank 1"),
    _error("slice_update_shape_mismatch",
           lambda lib: apply("tp.slice_update", lib.zeros(4), lib.zeros(3), starts=(0,), ends=(2,),
                                          steps=(1,)),
           ValueError, r"tp\.slice_update: update of shape \[3\] does not fit the box of shape \[2\]"),
    _error("concat_op_mixed_dtypes",
           lambda lib: apply("tp.concat", lib.zeros(2), lib.zeros(2, dtype=lib.int64)),
           TypeError, r"tp\.concat: all inputs must have one dtype; got float32 and int64"),
]


# --- diag, diag_embed, repeat_interleave ---------------------------------------------------------

def _diag_embed_ref(a, offset=0, dim1=-2, dim2=-1):
    a = np.asarray(a)
    n = a.shape[-1] + abs(offset)
    out = np.zeros(a.shape[:-1] + (n, n), a.dtype)
    for i in range(a.shape[-1]):
        r, c = (i, i + offset) if offset >= 0 else (i - offset, i)
        out[..., r, c] = a[..., i]
    rank = out.ndim
    return np.moveaxis(out, (rank - 2, rank - 1), (dim1 % rank, dim2 % rank))


def _repeat_interleave_ref(a, repeats, dim=None, **kw):
    a = np.asarray(a)
    return np.repeat(a, repeats, axis=dim)


OPS += [
    OpInfo("diag", lambda lib, a, k=0: lib.diag(a, k), lambda a, k=0: np.diag(a, k),
           lambda rng, dtype: [Sample((make_arg(rng, (3,), dtype), 1), {}, "1-d above"),
                               Sample((make_arg(rng, (3,), dtype), -2), {}, "1-d below"),
                               Sample((make_arg(rng, (3, 4), dtype),), {}, "2-d"),
                               Sample((make_arg(rng, (3, 4), dtype), 2), {}, "2-d above")], dtypes=ALL_DTYPES),
    OpInfo("diag_embed", lambda lib, a, **kw: lib.diag_embed(a, **kw), _diag_embed_ref,
           lambda rng, dtype: [Sample((make_arg(rng, (2, 3), dtype),), {}, "default"),
                               Sample((make_arg(rng, (2, 3), dtype),), {"offset": -1, "dim1": 0, "dim2": 2},
                                      "below, moved dims")]),
    OpInfo("repeat_interleave", lambda lib, a, r, **kw: lib.repeat_interleave(a, r, **kw), _repeat_interleave_ref,
           lambda rng, dtype: [Sample((make_arg(rng, (2, 3), dtype), 2), {}, "int, flattened"),
                               Sample((make_arg(rng, (2, 3), dtype), 2), {"dim": 1}, "int, dim 1"),
                               Sample((make_arg(rng, (2, 3), dtype), np.array([1, 0, 3])), {"dim": 1},
                                      "tensor repeats"),
                               Sample((make_arg(rng, (2, 3), dtype), np.array([2, 1])), {"dim": 0, "output_size": 3},
                                      "output_size")], dtypes=ALL_DTYPES),
]
