"""ONNX building blocks of `jaxrl.deploy.onnx_convert`: the graph builder and the per-primitive
handlers (standard opset 17 ops only).

A handler is `handler(g: Graph, eqn, ins) -> list of output values`, where each value is an ONNX
tensor name or a `Const` (a value known at export time). Primitives that map to one ONNX op
are in `IDENTITY` / `UNARY` / `BINARY`; the rest are in `HANDLERS`. Call-like primitives and
`scan` need the interpreter and live in `onnx_convert`.

Sources: ONNX operator specs (onnx.ai/onnx/operators, opset 17); lax primitive semantics from
`jax/_src/lax/lax.py`, `jax/_src/lax/slicing.py`.
"""

from __future__ import annotations

import dataclasses
import string
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

ONNX_IMPORT_ERROR: ImportError | None = None
try:
    import onnx
    from onnx import helper, numpy_helper
except ImportError as _err:  # `used_inputs` still works; `jaxpr_to_onnx` says what to install
    onnx = helper = numpy_helper = None
    ONNX_IMPORT_ERROR = _err

OPSET = 17
IR_VERSION = 8  # the IR version that introduced opset 17; readable by older runtimes


class UnsupportedPrimitiveError(NotImplementedError):
    """A JAX primitive (or a use of one) the ONNX converter has no mapping for."""


@dataclasses.dataclass(frozen=True)
class Const:
    """A value known at export time (JAX or numpy array, possibly a PRNG key array)."""

    val: object


class Graph:
    """Accumulates ONNX nodes and initializers with unique tensor names.

    Initializers are deduplicated by content: an unrolled `scan` folds the same parameter
    reshape (or shape constant) once per iteration, and all of them share one initializer.
    """

    def __init__(self, reserved: Sequence[str]):
        self.nodes: list = []  # onnx.NodeProto
        self.initializers: list = []  # onnx.TensorProto
        self._count = 0
        self._reserved = set(reserved)
        self._const_names: dict[int, tuple[Const, str]] = {}
        self._by_content: dict[tuple, str] = {}

    def fresh(self, hint: str) -> str:
        while True:
            self._count += 1
            name = f"{hint}_{self._count}"
            if name not in self._reserved:
                return name

    def node(self, op: str, inputs: Sequence[str], num_outputs: int = 1, **attrs) -> list[str]:
        outs = [self.fresh(op.lower()) for _ in range(num_outputs)]
        self.nodes.append(helper.make_node(op, list(inputs), outs, **attrs))
        return outs

    def op(self, op: str, *inputs: str, **attrs) -> str:
        """One-output node."""
        return self.node(op, inputs, 1, **attrs)[0]

    def const(self, value, hint: str = "const") -> str:
        """Initializer holding `value` (numpy-convertible); returns its tensor name."""
        arr = np.asarray(value)
        if not arr.flags.c_contiguous:  # (np.ascontiguousarray would make 0-d arrays 1-d)
            arr = np.ascontiguousarray(arr)
        if arr.dtype == np.float64:
            arr = arr.astype(np.float32)
        key = (arr.dtype.str, arr.shape, arr.tobytes())
        name = self._by_content.get(key)
        if name is None:
            name = self._by_content[key] = self.fresh(hint)
            self.initializers.append(numpy_helper.from_array(arr, name))
        return name

    def name_of(self, value) -> str:
        """Tensor name of a graph value: a name, or a `Const` (made an initializer once)."""
        if isinstance(value, str):
            return value
        entry = self._const_names.get(id(value))
        if entry is None:
            if jax.dtypes.issubdtype(getattr(value.val, "dtype", None), jax.dtypes.prng_key):
                raise UnsupportedPrimitiveError(
                    "a PRNG key reaches an observation-dependent operation; random sampling that "
                    "depends on the observation cannot be exported (use deterministic=True).")
            entry = (value, self.const(np.asarray(value.val), "param"))
            self._const_names[id(value)] = entry
        return entry[1]


IDENTITY = {"stop_gradient", "copy", "copy_p", "sharding_constraint", "optimization_barrier",
            "pvary", "mesh_cast", "reshard"}
UNARY = {"neg": "Neg", "abs": "Abs", "exp": "Exp", "log": "Log", "sqrt": "Sqrt",
         "tanh": "Tanh", "logistic": "Sigmoid", "erf": "Erf", "sin": "Sin", "cos": "Cos",
         "tan": "Tan", "asin": "Asin", "acos": "Acos", "atan": "Atan", "sinh": "Sinh",
         "cosh": "Cosh", "asinh": "Asinh", "acosh": "Acosh", "atanh": "Atanh",
         "floor": "Floor", "ceil": "Ceil", "sign": "Sign", "not": "Not"}
BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "max": "Max", "min": "Min",
          "pow": "Pow", "eq": "Equal", "lt": "Less", "le": "LessOrEqual", "gt": "Greater",
          "ge": "GreaterOrEqual", "and": "And", "or": "Or", "xor": "Xor"}


def _out_aval(eqn, i: int = 0):
    return eqn.outvars[i].aval


def _in_aval(eqn, i: int = 0):
    return eqn.invars[i].aval


def _onnx_dtype(dtype) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def _scalar(value, dtype) -> np.ndarray:
    return np.asarray(value, dtype=np.dtype(dtype))


# ---- elementwise -------------------------------------------------------------------------------


def _rsqrt(g, eqn, ins):
    return [g.op("Reciprocal", g.op("Sqrt", g.name_of(ins[0])))]


def _square(g, eqn, ins):
    x = g.name_of(ins[0])
    return [g.op("Mul", x, x)]


def _log1p(g, eqn, ins):
    one = g.const(_scalar(1, _in_aval(eqn).dtype))
    return [g.op("Log", g.op("Add", g.name_of(ins[0]), one))]


def _expm1(g, eqn, ins):
    one = g.const(_scalar(1, _in_aval(eqn).dtype))
    return [g.op("Sub", g.op("Exp", g.name_of(ins[0])), one)]


def _exp2(g, eqn, ins):
    return [g.op("Pow", g.const(_scalar(2, _in_aval(eqn).dtype)), g.name_of(ins[0]))]


def _erfc(g, eqn, ins):
    one = g.const(_scalar(1, _in_aval(eqn).dtype))
    return [g.op("Sub", one, g.op("Erf", g.name_of(ins[0])))]


def _ne(g, eqn, ins):
    return [g.op("Not", g.op("Equal", g.name_of(ins[0]), g.name_of(ins[1])))]


def _rem(g, eqn, ins):
    fmod = int(np.issubdtype(np.dtype(_in_aval(eqn).dtype), np.floating))
    return [g.op("Mod", g.name_of(ins[0]), g.name_of(ins[1]), fmod=1 if fmod else 0)]


def _is_finite(g, eqn, ins):
    x = g.name_of(ins[0])
    return [g.op("Not", g.op("Or", g.op("IsInf", x), g.op("IsNaN", x)))]


def _round(g, eqn, ins):
    x = g.name_of(ins[0])
    if int(eqn.params["rounding_method"]) == 1:  # to nearest even, as ONNX Round
        return [g.op("Round", x)]
    half = g.const(_scalar(0.5, _in_aval(eqn).dtype))
    away = g.op("Floor", g.op("Add", g.op("Abs", x), half))
    return [g.op("Mul", g.op("Sign", x), away)]


def _integer_pow(g, eqn, ins):
    """x ** y for a static integer y: repeated squaring, reciprocal for y < 0."""
    x, y = g.name_of(ins[0]), int(eqn.params["y"])
    if y == 0:
        return [g.const(np.ones(_out_aval(eqn).shape, _out_aval(eqn).dtype))]
    result, base, n = None, x, abs(y)
    while n:
        if n & 1:
            result = base if result is None else g.op("Mul", result, base)
        n >>= 1
        if n:
            base = g.op("Mul", base, base)
    return [g.op("Reciprocal", result) if y < 0 else result]


def _select_n(g, eqn, ins):
    """`select_n(which, *cases)`: cases[which]; bool `which` picks cases[1] where true."""
    which, cases = ins[0], [g.name_of(c) for c in ins[1:]]
    if len(cases) == 1:
        return [g.op("Identity", cases[0])]
    pred = g.name_of(which)
    if np.dtype(_in_aval(eqn).dtype) == np.bool_:
        return [g.op("Where", pred, cases[1], cases[0])]
    out = cases[0]
    for i in range(1, len(cases)):
        idx = g.const(_scalar(i, _in_aval(eqn).dtype))
        out = g.op("Where", g.op("Equal", pred, idx), cases[i], out)
    return [out]


def _clamp(g, eqn, ins):
    low, x, high = (g.name_of(v) for v in ins)
    return [g.op("Min", g.op("Max", x, low), high)]


def _convert_element_type(g, eqn, ins):
    new = eqn.params["new_dtype"]
    x = g.name_of(ins[0])
    if np.dtype(new) == np.dtype(_in_aval(eqn).dtype):
        return [g.op("Identity", x)]
    return [g.op("Cast", x, to=_onnx_dtype(new))]


# ---- linear algebra ----------------------------------------------------------------------------


def _dot_general(g, eqn, ins):
    """MatMul for `x @ W` (W 2-D, contracted on a single axis), Einsum otherwise."""
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lhs, rhs = _in_aval(eqn, 0), _in_aval(eqn, 1)
    out_dtype = _out_aval(eqn).dtype
    simple = (not lb and not rb and len(lc) == 1 and lc[0] == lhs.ndim - 1 and rhs.ndim == 2
              and len(rc) == 1)
    if simple:
        w = ins[1]
        if rc[0] == 1:
            w = Const(np.asarray(w.val).T) if isinstance(w, Const) else g.op(
                "Transpose", g.name_of(w), perm=[1, 0])
        out = g.op("MatMul", g.name_of(ins[0]), g.name_of(w))
    else:
        out = g.op("Einsum", g.name_of(ins[0]), g.name_of(ins[1]),
                   equation=_einsum_equation(lhs.ndim, rhs.ndim, lc, rc, lb, rb))
    if np.dtype(out_dtype) != np.dtype(lhs.dtype):
        out = g.op("Cast", out, to=_onnx_dtype(out_dtype))
    return [out]


def _einsum_equation(l_ndim, r_ndim, lc, rc, lb, rb) -> str:
    """lax.dot_general output order: batch dims, lhs free dims, rhs free dims."""
    letters = iter(string.ascii_lowercase)
    lhs = [next(letters) for _ in range(l_ndim)]
    rhs = [None] * r_ndim
    for li, ri in zip(tuple(lc) + tuple(lb), tuple(rc) + tuple(rb), strict=True):
        rhs[ri] = lhs[li]
    rhs = [c if c is not None else next(letters) for c in rhs]
    out = [lhs[i] for i in lb]
    out += [lhs[i] for i in range(l_ndim) if i not in lc and i not in lb]
    out += [rhs[i] for i in range(r_ndim) if i not in rc and i not in rb]
    return f"{''.join(lhs)},{''.join(rhs)}->{''.join(out)}"


# ---- shapes ------------------------------------------------------------------------------------


def _shape_const(g, shape) -> str:
    return g.const(np.asarray(shape, np.int64), "shape")


def _reshape_to_out(g, eqn, ins):
    return [g.op("Reshape", g.name_of(ins[0]), _shape_const(g, _out_aval(eqn).shape))]


def _reshape(g, eqn, ins):
    x = g.name_of(ins[0])
    if eqn.params.get("dimensions") is not None:
        x = g.op("Transpose", x, perm=list(eqn.params["dimensions"]))
    return [g.op("Reshape", x, _shape_const(g, eqn.params["new_sizes"]))]


def _broadcast_in_dim(g, eqn, ins):
    shape, dims = tuple(eqn.params["shape"]), tuple(eqn.params["broadcast_dimensions"])
    src = _in_aval(eqn).shape
    x = g.name_of(ins[0])
    mid = [1] * len(shape)
    for d, size in zip(dims, src, strict=True):
        mid[d] = size
    if tuple(mid) != tuple(src):
        x = g.op("Reshape", x, _shape_const(g, mid))
    if tuple(mid) == shape:
        return [g.op("Identity", x)]
    return [g.op("Expand", x, _shape_const(g, shape))]


def _concatenate(g, eqn, ins):
    return [g.op("Concat", *[g.name_of(x) for x in ins], axis=int(eqn.params["dimension"]))]


def _transpose(g, eqn, ins):
    return [g.op("Transpose", g.name_of(ins[0]), perm=list(eqn.params["permutation"]))]


def _split(g, eqn, ins):
    sizes = g.const(np.asarray(eqn.params["sizes"], np.int64), "sizes")
    return g.node("Split", [g.name_of(ins[0]), sizes], len(eqn.outvars),
                  axis=int(eqn.params["axis"]))


def _slice(g, eqn, ins):
    p = eqn.params
    n = len(p["start_indices"])
    strides = p["strides"] or (1,) * n
    args = [np.asarray(a, np.int64) for a in (p["start_indices"], p["limit_indices"], range(n),
                                                strides)]
    return [g.op("Slice", g.name_of(ins[0]), *[g.const(a, "slice") for a in args])]


def _pad(g, eqn, ins):
    config = eqn.params["padding_config"]
    if any(interior for _, _, interior in config) or any(lo < 0 or hi < 0
                                                          for lo, hi, _ in config):
        raise UnsupportedPrimitiveError("lax.pad with interior or negative padding.")
    pads = np.asarray([lo for lo, _, _ in config] + [hi for _, hi, _ in config], np.int64)
    value = g.op("Reshape", g.name_of(ins[1]), _shape_const(g, []))
    return [g.op("Pad", g.name_of(ins[0]), g.const(pads, "pads"), value, mode="constant")]


def _index_map(g, eqn, ins):
    """Data movement with constant indices (gather, dynamic_slice, rev): one flat `Gather`."""
    if not all(isinstance(x, Const) for x in ins[1:]):
        raise UnsupportedPrimitiveError(
            f"{eqn.primitive.name!r} with observation-dependent indices.")
    shape = _in_aval(eqn).shape
    iota = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    params = dict(eqn.params)
    if eqn.primitive.name == "gather":
        params["fill_value"] = -1
    bind_params = eqn.primitive.get_bind_params(params)
    idx = np.asarray(eqn.primitive.bind(iota, *[x.val for x in ins[1:]], **bind_params))
    if (idx < 0).any():
        raise UnsupportedPrimitiveError(f"{eqn.primitive.name!r} with out-of-bounds indices.")
    flat = g.op("Reshape", g.name_of(ins[0]), _shape_const(g, [-1]))
    return [g.op("Gather", flat, g.const(idx.astype(np.int64), "indices"), axis=0)]


def _index_merge(g, eqn, ins):
    """`dynamic_update_slice(operand, update, *starts)` / `scatter(operand, indices, updates)`
    (replace) with constant indices: `Gather` from `concat(flat operand, flat update)`, the
    positions found by running the primitive on index arrays."""
    upd_pos = 1 if eqn.primitive.name == "dynamic_update_slice" else 2
    index_ins = [x for i, x in enumerate(ins[1:], 1) if i != upd_pos]
    if not all(isinstance(x, Const) for x in index_ins):
        raise UnsupportedPrimitiveError(
            f"{eqn.primitive.name!r} with observation-dependent indices.")
    op_shape, upd_shape = _in_aval(eqn, 0).shape, _in_aval(eqn, upd_pos).shape
    n_op, n_upd = int(np.prod(op_shape)), int(np.prod(upd_shape))
    args = [x.val if isinstance(x, Const) else None for x in ins]
    args[0] = np.arange(n_op, dtype=np.int32).reshape(op_shape)
    args[upd_pos] = np.arange(n_op, n_op + n_upd, dtype=np.int32).reshape(upd_shape)
    idx = np.asarray(eqn.primitive.bind(*args, **eqn.primitive.get_bind_params(eqn.params)))
    flat = [g.op("Reshape", g.name_of(ins[i]), _shape_const(g, [-1])) for i in (0, upd_pos)]
    both = g.op("Concat", *flat, axis=0)
    return [g.op("Gather", both, g.const(idx.astype(np.int64), "indices"), axis=0)]


def _reduce(op: str) -> Callable:
    def handler(g, eqn, ins):
        axes = [int(a) for a in eqn.params["axes"]]
        x = g.name_of(ins[0])
        if not axes:
            return [g.op("Identity", x)]
        if op == "ReduceSum":  # axes are an input from opset 13, an attribute for the others
            return [g.op(op, x, g.const(np.asarray(axes, np.int64), "axes"), keepdims=0)]
        return [g.op(op, x, axes=axes, keepdims=0)]

    return handler


def _arg_reduce(op: str) -> Callable:
    def handler(g, eqn, ins):
        (axis,) = eqn.params["axes"]
        out = g.op(op, g.name_of(ins[0]), axis=int(axis), keepdims=0)
        return [g.op("Cast", out, to=_onnx_dtype(eqn.params["index_dtype"]))]

    return handler


def _cumulative(g, eqn, ins):
    axis = g.const(np.asarray(int(eqn.params["axis"]), np.int64), "axis")
    return [g.op("CumSum", g.name_of(ins[0]), axis, reverse=int(eqn.params["reverse"]))]


HANDLERS: dict[str, Callable] = {
    "rsqrt": _rsqrt, "square": _square, "log1p": _log1p, "expm1": _expm1, "exp2": _exp2,
    "erfc": _erfc, "ne": _ne, "rem": _rem, "is_finite": _is_finite, "round": _round,
    "integer_pow": _integer_pow, "select_n": _select_n, "clamp": _clamp,
    "convert_element_type": _convert_element_type, "dot_general": _dot_general,
    "reshape": _reshape, "squeeze": _reshape_to_out, "expand_dims": _reshape_to_out,
    "broadcast_in_dim": _broadcast_in_dim, "concatenate": _concatenate, "transpose": _transpose,
    "split": _split, "slice": _slice, "pad": _pad, "gather": _index_map,
    "dynamic_slice": _index_map, "rev": _index_map, "reduce_sum": _reduce("ReduceSum"),
    "reduce_max": _reduce("ReduceMax"), "reduce_min": _reduce("ReduceMin"),
    "reduce_prod": _reduce("ReduceProd"), "argmax": _arg_reduce("ArgMax"),
    "argmin": _arg_reduce("ArgMin"), "cumsum": _cumulative,
    "dynamic_update_slice": _index_merge, "scatter": _index_merge,
}


def take(g: Graph, value, i: int):
    """`value[i]` along axis 0 (a scan's per-iteration slice of `xs`)."""
    if isinstance(value, Const):
        return Const(value.val[i])
    return g.op("Gather", value, g.const(np.asarray(i, np.int64), "index"), axis=0)


def stack(g: Graph, values: Sequence):
    """`values` stacked on a new axis 0 (a scan's `ys`)."""
    if all(isinstance(v, Const) for v in values):
        return Const(jnp.stack([v.val for v in values]))
    axes = g.const(np.asarray([0], np.int64), "axes")
    rows = [g.op("Unsqueeze", g.name_of(v), axes) for v in values]
    return rows[0] if len(rows) == 1 else g.op("Concat", *rows, axis=0)

