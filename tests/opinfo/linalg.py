"""Linear-algebra cases: matmul in all its shapes, mm, bmm, mv, dot, inner, outer and einsum."""

from __future__ import annotations

import numpy as np

import tensorplay as tp
from tests.opinfo import FLOATS, ErrorCase, OpInfo, Sample, make_arg

#: int matmul wraps on overflow; small values keep the expectations exact in int8 too
MATMUL_INTS = (tp.int8, tp.int32, tp.int64, tp.uint8)
#: products of several terms: half types round each stored intermediate
def _f(a):
    """numpy input as float64 for expectations."""
    return np.asarray(a, dtype=np.float64)


def _arg(rng, shape, dtype):
    return make_arg(rng, shape, dtype, low=-3, high=4)


def _pairs(shapes):
    def samples(rng, dtype):
        return [Sample((_arg(rng, a, dtype), _arg(rng, b, dtype)), desc=f"{a} @ {b}") for a, b in shapes]

    return samples


_MATMUL_SHAPES = [
    ((3, 4), (4, 5)),          # matrix x matrix
    ((4,), (4,)),              # vector . vector -> 0-d
    ((4,), (4, 5)),            # vector x matrix
    ((3, 4), (4,)),            # matrix x vector
    ((2, 3, 4), (4, 5)),       # batch x matrix
    ((2, 3, 2, 4), (4, 5)),    # two batch dims x matrix (the rhs gradient: one product over all rows)
    ((3, 4), (2, 4, 5)),       # matrix x batch
    ((2, 1, 3, 4), (5, 4, 2)),  # broadcast batch dims
    ((4,), (2, 4, 3)),         # vector x batch
    ((2, 3, 4), (4,)),         # batch x vector
    ((3, 0), (0, 2)),          # empty contraction: zeros
    ((0, 2, 3), (3, 4)),       # empty batch
    ((1, 1), (1, 1)),
]


def _matmul_ref(a, b):
    return np.matmul(_f(a), _f(b))


def _einsum_case(name, equation, shapes, *, as_list=False, ref=None):
    def samples(rng, dtype):
        return [Sample(tuple(_arg(rng, s, dtype) for s in shapes), desc=equation)]

    if as_list:
        def fn(lib, *ops):
            return lib.einsum(equation, list(ops))
    else:
        def fn(lib, *ops):
            return lib.einsum(equation, *ops)

    def default_ref(*ops):
        return np.einsum(equation, *[_f(o) for o in ops])

    return OpInfo(f"einsum_{name}", fn, ref or default_ref, samples, dtypes=FLOATS)


def _einsum_sublist_samples(rng, dtype):
    return [Sample((_arg(rng, (2, 3), dtype), _arg(rng, (3, 4), dtype)), desc="sublists")]


def _einsum_int_samples(rng, dtype):
    return [Sample((_arg(rng, (2, 3), dtype), _arg(rng, (3, 4), dtype), _arg(rng, (2, 3), dtype)))]


def _einsum_ints_fn(lib, a, b, c):
    # dtypes follow PyTorch: contractions keep the dtype, a dim summed inside one operand
    # (a reduction) promotes integers to int64
    return (lib.einsum("ij,jk->ik", a, b), lib.einsum("ij,ij->i", a, c),
            lib.einsum("ij->j", a), lib.einsum("ii->i", a[:, :2]), lib.einsum("ij,jk->jk", a, b))


def _einsum_ints_ref(a, b, c):
    a64, b64, c64 = (x.astype(np.int64) for x in (a, b, c))
    return (a64 @ b64, (a64 * c64).sum(1), a64.sum(0), np.diagonal(a64[:, :2]),
            a64.sum(0)[:, None] * b64)


def _outer_mixed_samples(rng, dtype):
    return [Sample((_arg(rng, (3,), dtype), _arg(rng, (4,), tp.int32)), desc="promotes with int32"),
            Sample((_arg(rng, (0,), dtype), _arg(rng, (2,), dtype)), desc="empty")]


def _inner_samples(rng, dtype):
    return [Sample((_arg(rng, (2, 3), dtype), _arg(rng, (4, 3), dtype)), desc="2-d . 2-d"),
            Sample((_arg(rng, (3,), dtype), _arg(rng, (3,), dtype)), desc="vectors"),
            Sample((_arg(rng, (2, 2, 3), dtype), _arg(rng, (3,), dtype)), desc="3-d . 1-d"),
            Sample((_arg(rng, (), dtype), _arg(rng, (2, 3), dtype)), desc="0-d scales")]


def _inner_ref(a, b):
    return np.inner(_f(a), _f(b))


OPS = [
    OpInfo("matmul", lambda lib, a, b: lib.matmul(a, b), _matmul_ref, _pairs(_MATMUL_SHAPES),
           dtypes=FLOATS + MATMUL_INTS),
    OpInfo("matmul_operator", lambda lib, a, b: a @ b, _matmul_ref,
           _pairs([((2, 3), (3, 4)), ((5,), (5,)), ((2, 2, 3), (3,))]), dtypes=FLOATS + MATMUL_INTS),
    OpInfo("matmul_method", lambda lib, a, b: a.matmul(b), _matmul_ref, _pairs([((2, 3), (3, 4))]),
           dtypes=FLOATS),
    OpInfo("mm", lambda lib, a, b: lib.mm(a, b), _matmul_ref,
           _pairs([((3, 4), (4, 5)), ((1, 7), (7, 1)), ((0, 3), (3, 2))]), dtypes=FLOATS + MATMUL_INTS),
    OpInfo("mm_method", lambda lib, a, b: a.mm(b), _matmul_ref, _pairs([((2, 3), (3, 2))])),
    OpInfo("bmm", lambda lib, a, b: lib.bmm(a, b), _matmul_ref,
           _pairs([((2, 3, 4), (2, 4, 5)), ((1, 1, 3), (1, 3, 1)), ((3, 2, 0), (3, 0, 2))]),
           dtypes=FLOATS + MATMUL_INTS),
    OpInfo("bmm_method", lambda lib, a, b: a.bmm(b), _matmul_ref, _pairs([((2, 3, 4), (2, 4, 5))])),
    OpInfo("mv", lambda lib, a, b: lib.mv(a, b), _matmul_ref, _pairs([((3, 4), (4,)), ((0, 2), (2,))]),
           dtypes=FLOATS + MATMUL_INTS),
    OpInfo("dot", lambda lib, a, b: lib.dot(a, b), lambda a, b: np.dot(_f(a), _f(b)),
           _pairs([((5,), (5,)), ((0,), (0,)), ((1,), (1,))]), dtypes=FLOATS + MATMUL_INTS),
    OpInfo("dot_method", lambda lib, a, b: a.dot(b), lambda a, b: np.dot(_f(a), _f(b)),
           _pairs([((5,), (5,))])),
    OpInfo("inner", lambda lib, a, b: lib.inner(a, b), _inner_ref, _inner_samples,
           dtypes=FLOATS + (tp.int32, tp.int64)),
    OpInfo("outer", lambda lib, a, b: lib.outer(a, b), lambda a, b: np.outer(_f(a), _f(b)),
           _pairs([((3,), (4,)), ((1,), (2,))]), dtypes=FLOATS + MATMUL_INTS + (tp.bool,)),
    OpInfo("outer_method_promotes", lambda lib, a, b: a.outer(b), lambda a, b: np.outer(_f(a), _f(b)),
           _outer_mixed_samples, dtypes=FLOATS + (tp.int64,)),
    _einsum_case("matmul", "ij,jk->ik", [(3, 4), (4, 5)]),
    _einsum_case("batch_matmul", "bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    _einsum_case("attention_scores", "bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    _einsum_case("transpose", "ij->ji", [(3, 4)]),
    _einsum_case("diagonal", "ii->i", [(4, 4)]),
    _einsum_case("trace", "ii", [(4, 4)]),
    _einsum_case("diagonal_3d", "iji->ij", [(3, 2, 3)]),
    _einsum_case("dot", "i,i->", [(5,), (5,)]),
    _einsum_case("outer", "i,j->ij", [(3,), (4,)]),
    _einsum_case("sum_all", "ij->", [(3, 4)]),
    _einsum_case("sum_rows", "ij->j", [(3, 4)]),
    _einsum_case("ellipsis_matmul", "...ij,...jk->...ik", [(5, 2, 3), (3, 4)]),
    _einsum_case("ellipsis_broadcast", "...ij,...jk", [(2, 1, 2, 3), (5, 3, 4)]),
    _einsum_case("ellipsis_sum", "i...->...", [(2, 3, 4)]),
    _einsum_case("implicit", "ba,ac", [(2, 3), (3, 4)]),
    _einsum_case("implicit_uppercase_first", "bA,Ab", [(2, 3), (3, 2)]),
    _einsum_case("three_operands", "ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    _einsum_case("bilinear", "bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
    _einsum_case("private_dims", "ij,k->", [(2, 3), (4,)]),
    _einsum_case("hadamard_broadcast", "ij,ij->ij", [(2, 3), (2, 1)]),
    _einsum_case("broadcast_sum", "ij,ij->i", [(2, 3), (1, 3)]),
    _einsum_case("size1_batch", "bij,bjk->bik", [(2, 2, 3), (1, 3, 4)]),
    _einsum_case("empty_contraction", "ij,jk->ik", [(2, 0), (0, 3)]),
    _einsum_case("scalars", ",->", [(), ()]),
    _einsum_case("spaces", " ij , jk -> ki ", [(2, 3), (3, 4)],
                 ref=lambda a, b: np.einsum("ij,jk->ki", _f(a), _f(b))),
    _einsum_case("operand_list", "ij,jk->ik", [(2, 3), (3, 4)], as_list=True),
    OpInfo("einsum_sublist", lambda lib, a, b: lib.einsum(a, [0, 1], b, [1, 2], [0, 2]),
           lambda a, b: _f(a) @ _f(b), _einsum_sublist_samples, dtypes=FLOATS),
    OpInfo("einsum_int_dtypes", _einsum_ints_fn, _einsum_ints_ref, _einsum_int_samples,
           dtypes=(tp.int32, tp.int8)),
]


def _mat(lib, *shape, dtype=None):
    return lib.ones(*shape, dtype=dtype or lib.float32)


ERRORS = [
    ErrorCase("matmul_size_mismatch_names_both_shapes", lambda lib: lib.ones(2, 3) @ lib.ones(4, 5),
              tp.ShapeError, r"tp\.matmul: mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"),
    ErrorCase("matmul_size_mismatch_is_runtime_error", lambda lib: lib.ones(3) @ lib.ones(4),
              RuntimeError, r"cannot be multiplied \(3 and 4\)"),
    ErrorCase("matmul_vector_size_mismatch", lambda lib: lib.matmul(lib.ones(2, 3), lib.ones(4)),
              tp.ShapeError, r"\(2x3 and 4\)"),
    ErrorCase("matmul_batch_mismatch", lambda lib: lib.ones(2, 2, 3) @ lib.ones(3, 3, 5),
              tp.ShapeError, r"tp\.matmul: The size of tensor a \(2\) must match the size of tensor "
                             r"b \(3\)"),
    ErrorCase("matmul_0d", lambda lib: lib.matmul(lib.ones(()), lib.ones(3)), RuntimeError,
              r"both arguments to matmul need to be at least 1D, but they are 0D and 1D"),
    ErrorCase("matmul_mixed_dtypes", lambda lib: lib.ones(2, 3) @ lib.ones(3, 2, dtype=lib.float64),
              RuntimeError, r"expected m1 and m2 to have the same dtype, but got: float32 != float64"),
    ErrorCase("matmul_int_dtypes_do_not_promote",
              lambda lib: lib.ones(2, 3, dtype=lib.int32) @ lib.ones(3, 2, dtype=lib.int64),
              TypeError, r"same dtype, but got: int32 != int64"),
    ErrorCase("matmul_bool", lambda lib: lib.ones(2, 3, dtype=lib.bool) @ lib.ones(3, 2, dtype=lib.bool),
              RuntimeError, r"tp\.matmul: not implemented for dtype bool"),
    ErrorCase("matmul_python_number", lambda lib: lib.matmul(lib.ones(3), 2), TypeError,
              r"matmul\(\): argument 'other' \(position 2\) must be Tensor, not int"),
    ErrorCase("mm_needs_matrices", lambda lib: lib.mm(lib.ones(3), lib.ones(3, 2)), RuntimeError,
              r"mm: self must be a matrix"),
    ErrorCase("mm_size_mismatch", lambda lib: lib.mm(lib.ones(2, 3), lib.ones(4, 5)), RuntimeError,
              r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"),
    ErrorCase("bmm_needs_3d", lambda lib: lib.bmm(lib.ones(2, 3), lib.ones(2, 3, 4)), RuntimeError,
              r"bmm: batch1 must be a 3D tensor"),
    ErrorCase("bmm_batch_mismatch", lambda lib: lib.bmm(lib.ones(2, 2, 3), lib.ones(3, 3, 5)),
              RuntimeError, r"Expected size for first two dimensions of batch2 tensor to be: "
                            r"\[2, 3\] but got: \[3, 3\]"),
    ErrorCase("dot_needs_vectors", lambda lib: lib.dot(lib.ones(3, 1), lib.ones(3, 1)), RuntimeError,
              r"1D tensors expected, but got 2D and 2D tensors"),
    ErrorCase("dot_size_mismatch", lambda lib: lib.dot(lib.ones(3), lib.ones(4)), RuntimeError,
              r"inconsistent tensor size, expected tensor \[3\] and src \[4\]"),
    ErrorCase("dot_mixed_dtypes", lambda lib: lib.dot(lib.ones(3), lib.ones(3, dtype=lib.float64)),
              RuntimeError, r"dot: expected both vectors to have same dtype"),
    ErrorCase("mv_size_mismatch", lambda lib: lib.mv(lib.ones(2, 3), lib.ones(4)), RuntimeError,
              r"size mismatch, got input \(2\), mat \(2x3\), vec \(4\)"),
    ErrorCase("outer_needs_vectors", lambda lib: lib.outer(lib.ones(3, 1), lib.ones(3)), RuntimeError,
              r"outer: Expected 1-D argument self, but got 2-D"),
    ErrorCase("einsum_size_mismatch",
              lambda lib: lib.einsum("ij,jk->ik", lib.ones(2, 3), lib.ones(4, 2)), RuntimeError,
              r"einsum\(\): subscript j has size 4 for operand 1 which does not broadcast with "
              r"previously seen size 3"),
    ErrorCase("einsum_unknown_output_label", lambda lib: lib.einsum("ij->ik", lib.ones(2, 3)),
              RuntimeError, r"output subscript k does not appear in the equation"),
    ErrorCase("einsum_repeated_output_label", lambda lib: lib.einsum("ij->ii", lib.ones(2, 3)),
              RuntimeError, r"output subscript i appears more than once in the output"),
    ErrorCase("einsum_too_few_operands", lambda lib: lib.einsum("ij,jk->ik", lib.ones(2, 3)),
              RuntimeError, r"fewer operands were provided than specified in the equation"),
    ErrorCase("einsum_too_many_operands",
              lambda lib: lib.einsum("ij->ij", lib.ones(2, 3), lib.ones(2, 3)), RuntimeError,
              r"more operands were provided than specified in the equation"),
    ErrorCase("einsum_rank_mismatch", lambda lib: lib.einsum("ijk->ij", lib.ones(2, 3)), RuntimeError,
              r"number of subscripts in the equation \(3\) does not match the number of dimensions "
              r"\(2\) for operand 0"),
    ErrorCase("einsum_bad_subscript", lambda lib: lib.einsum("i1,1k->ik", lib.ones(2, 3), lib.ones(3, 4)),
              RuntimeError, r"invalid subscript given at index 1 in the equation string"),
    ErrorCase("einsum_lone_dot", lambda lib: lib.einsum("ij..,jk->ik", lib.ones(2, 3), lib.ones(3, 4)),
              RuntimeError, r"found '\.' for operand 0 that is not part of any ellipsis"),
    ErrorCase("einsum_diagonal_sizes", lambda lib: lib.einsum("ii->i", lib.ones(2, 3)), RuntimeError,
              r"subscript i is repeated for operand 0 but the sizes don't match, 2 != 3"),
    ErrorCase("einsum_no_operands", lambda lib: lib.einsum("ij"), ValueError,
              r"must specify the equation string and at least one operand"),
    ErrorCase("einsum_bool_contraction",
              lambda lib: lib.einsum("ij,jk->ik", _mat(lib, 2, 3, dtype=lib.bool),
                                     _mat(lib, 3, 2, dtype=lib.bool)),
              RuntimeError, r"tp\.matmul: not implemented for dtype bool"),
]
