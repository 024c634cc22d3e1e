"""Convert a traced JAX function (a jaxpr) to an ONNX graph: any agent's policy, no per-agent code.

Why our own converter rather than `jax2onnx` (PyPI, the maintained JAX -> ONNX library): checked
on 2026-11-30, jax2onnx 0.17.1 converts our MLP policy correctly on jax 0.10.2 (7e-9 max error),
but it pins `orbax-checkpoint<0.11.37` while jaxrl's checkpoints need `orbax-checkpoint>=0.12.8`,
so the two cannot be installed together; it also pulls in huggingface-hub, netron, equinox and
dm-pix. A policy is a small graph of a few dozen primitives, which this module maps directly.

Method (`jaxpr_to_onnx`):
    1. Liveness: only equations that feed an output are visited (a PPO policy's scale head, the
       value net and anything else `act` computes but does not return are dropped).
    2. Constant folding: an equation whose inputs are all constants (parameters, normalizer
       statistics, literals, PRNG keys) is evaluated with JAX at export time. The normalizer's
       `mean` and `std` thus enter the graph as two initializers (folded in); count checks,
       clipping bounds and key splitting vanish.
    3. Call-like primitives (`jit`/`pjit`, `closed_call`, `core_call`, `custom_jvp_call`,
       `custom_vjp_call`, `remat`/`checkpoint`, and `cond` with a constant branch index) are
       inlined; `stop_gradient` and sharding annotations become `Identity`.
    4. Every other equation maps to ONNX nodes through `_HANDLERS` (standard opset 17 ops only:
       MatMul/Einsum, elementwise math, Where, Reshape/Expand/Concat/Slice/Gather, reductions).
       An equation with constant indices that only moves data (`gather`, `dynamic_slice`, `rev`)
       becomes one `Gather` on the flattened operand, its indices computed by running the same
       primitive on an index array. A primitive with no handler raises
       `UnsupportedPrimitiveError` naming it.

Shapes are the traced ones (fixed batch size). Numerics follow ONNX Runtime's kernels; `log1p`
and `expm1` are computed as `log(1 + x)` and `exp(x) - 1` (absolute error below 2e-7).
Sources: ONNX operator specs (onnx.ai/onnx/operators, opset 17); JAX `jax.core.eval_jaxpr`
for the interpretation loop; lax primitive semantics from `jax/_src/lax/lax.py`.
"""

from __future__ import annotations

import dataclasses
import string
from collections.abc import Callable, Sequence

import jax
import numpy as np
from jax.extend import core as jcore

try:
    import onnx
    from onnx import helper, numpy_helper
except ImportError as _err:  # `used_inputs` still works; `jaxpr_to_onnx` says what to install
    onnx = helper = numpy_helper = None
    _ONNX_IMPORT_ERROR = _err

OPSET = 17
IR_VERSION = 8  # the IR version that introduced opset 17; readable by older runtimes


class UnsupportedPrimitiveError(NotImplementedError):
    """A JAX primitive (or a use of one) the ONNX converter has no mapping for."""


@dataclasses.dataclass(frozen=True)
class _Const:
    """A value known at export time (JAX or numpy array, possibly a PRNG key array)."""

    val: object


class _Graph:
    """Accumulates ONNX nodes and initializers with unique tensor names."""

    def __init__(self, reserved: Sequence[str]):
        self.nodes: list = []  # onnx.NodeProto
        self.initializers: list = []  # onnx.TensorProto
        self._count = 0
        self._reserved = set(reserved)
        self._const_names: dict[int, tuple[_Const, str]] = {}

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
        if arr.dtype == np.float64:
            arr = arr.astype(np.float32)
        name = self.fresh(hint)
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def name_of(self, value) -> str:
        """Tensor name of a graph value: a name, or a `_Const` (made an initializer once)."""
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


def jaxpr_to_onnx(closed: jcore.ClosedJaxpr, input_names: Sequence[str],
                  output_names: Sequence[str], graph_name: str = "policy",
                  doc: str = "", prune_inputs: bool = True) -> onnx.ModelProto:
    """Converts a closed jaxpr to a checked ONNX model (opset `OPSET`).

    Args:
        closed: from `jax.make_jaxpr(fn)(*example_arrays)`; inputs and outputs are flat arrays.
        input_names: one ONNX input name per jaxpr input (e.g. `obs`, or dict keys).
        output_names: one ONNX output name per jaxpr output.
        graph_name: ONNX graph name.
        doc: ONNX graph doc string.
        prune_inputs: leave out inputs the outputs do not depend on (the dict-observation keys a
            policy does not read); all are kept when none is read.

    Returns:
        The `onnx.ModelProto`, validated with `onnx.checker.check_model(full_check=True)`.

    Raises:
        UnsupportedPrimitiveError: an observation-dependent primitive has no ONNX mapping.
        ValueError: name counts do not match the jaxpr.
        ImportError: `onnx` is not installed (the `export` extra).
    """
    if onnx is None:
        raise ImportError("ONNX export needs the `export` extra: from the jaxrl checkout, "
                          f"pip install -e '.[export]' ({_ONNX_IMPORT_ERROR}).")
    jaxpr = closed.jaxpr
    if len(input_names) != len(jaxpr.invars) or len(output_names) != len(jaxpr.outvars):
        raise ValueError(f"{len(jaxpr.invars)} inputs / {len(jaxpr.outvars)} outputs traced, "
                         f"got {len(input_names)} / {len(output_names)} names.")
    g = _Graph(list(input_names) + list(output_names))
    outs = _interpret(g, jaxpr, [_Const(c) for c in closed.consts], list(input_names))
    for value, name in zip(outs, output_names, strict=True):
        g.nodes.append(helper.make_node("Identity", [g.name_of(value)], [name]))
    used = used_inputs(jaxpr)
    keep = [i for i in range(len(input_names)) if used[i] or not prune_inputs or not any(used)]
    inputs = [_value_info(input_names[i], jaxpr.invars[i].aval) for i in keep]
    outputs = [_value_info(n, v.aval) for n, v in zip(output_names, jaxpr.outvars, strict=True)]
    graph = helper.make_graph(g.nodes, graph_name, inputs, outputs, g.initializers,
                              doc_string=doc)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="jaxrl", ir_version=IR_VERSION)
    onnx.checker.check_model(model, full_check=True)
    return model


def used_inputs(jaxpr: jcore.Jaxpr) -> list[bool]:
    """For each input of `jaxpr`, whether any output depends on it (through live equations)."""
    live = set(_live_vars(jaxpr))
    return [v in live for v in jaxpr.invars]


def _live_vars(jaxpr: jcore.Jaxpr, needed_outputs: Sequence[bool] | None = None) -> set:
    """Variables some needed output of `jaxpr` depends on (all outputs by default)."""
    mask = needed_outputs or [True] * len(jaxpr.outvars)
    needed = {v for v, m in zip(jaxpr.outvars, mask, strict=True)
              if m and not isinstance(v, jcore.Literal)}
    for eqn in reversed(jaxpr.eqns):
        if any(v in needed for v in eqn.outvars if not isinstance(v, jcore.DropVar)):
            needed.update(v for v in eqn.invars if not isinstance(v, jcore.Literal))
    return needed


def _value_info(name: str, aval) -> onnx.ValueInfoProto:
    dtype = helper.np_dtype_to_tensor_dtype(np.dtype(aval.dtype))
    return helper.make_tensor_value_info(name, dtype, list(aval.shape))


def _interpret(g: _Graph, jaxpr: jcore.Jaxpr, consts: list, args: list,
               needed_outputs: Sequence[bool] | None = None) -> list:
    """Runs `jaxpr` symbolically: values are ONNX tensor names or `_Const`s (None for outputs
    that are not needed)."""
    env: dict = {}

    def read(v):
        if isinstance(v, jcore.Literal):
            return _Const(np.asarray(v.val, v.aval.dtype))
        return env[v]

    env.update(zip(jaxpr.constvars, consts, strict=True))
    env.update(zip(jaxpr.invars, args, strict=True))
    live = _live_vars(jaxpr, needed_outputs)
    for eqn in jaxpr.eqns:
        wanted = [v in live for v in eqn.outvars if not isinstance(v, jcore.DropVar)]
        if not any(wanted):
            continue
        ins = [read(v) for v in eqn.invars]
        if all(isinstance(x, _Const) for x in ins):
            outs = [_Const(o) for o in _evaluate(eqn, [x.val for x in ins])]
        else:
            outs = _convert(g, eqn, ins, [not isinstance(v, jcore.DropVar) and v in live
                                          for v in eqn.outvars])
        for var, out in zip(eqn.outvars, outs, strict=True):
            if not isinstance(var, jcore.DropVar):
                env[var] = out
    mask = needed_outputs or [True] * len(jaxpr.outvars)
    return [read(v) if m else None for v, m in zip(jaxpr.outvars, mask, strict=True)]


def _evaluate(eqn, values: list) -> list:
    """Concrete evaluation of one equation with JAX (as `jax.core.eval_jaxpr` does)."""
    out = eqn.primitive.bind(*values, **eqn.primitive.get_bind_params(eqn.params))
    return list(out) if eqn.primitive.multiple_results else [out]


def _convert(g: _Graph, eqn, ins: list, needed: list[bool]) -> list:
    """ONNX values for the outputs of one observation-dependent equation."""
    name = eqn.primitive.name
    sub = _inline_target(eqn, ins)
    if sub is not None:
        inner, consts, args = sub
        return _interpret(g, inner, [_Const(c) for c in consts], args, needed)
    if name in _IDENTITY:
        return [g.op("Identity", g.name_of(x)) for x in ins[: len(eqn.outvars)]]
    if name in _UNARY:
        return [g.op(_UNARY[name], g.name_of(ins[0]))]
    if name in _BINARY:
        return [g.op(_BINARY[name], g.name_of(ins[0]), g.name_of(ins[1]))]
    handler = _HANDLERS.get(name)
    if handler is None:
        raise UnsupportedPrimitiveError(
            f"JAX primitive {name!r} has no ONNX mapping in jaxrl.deploy.onnx_convert (it depends "
            "on the observation, so it cannot be constant-folded). Add a handler to _HANDLERS.")
    return handler(g, eqn, ins)


_CALLS = {"jit": "jaxpr", "pjit": "jaxpr", "closed_call": "call_jaxpr",
          "core_call": "call_jaxpr", "custom_jvp_call": "call_jaxpr",
          "custom_vjp_call": "call_jaxpr", "custom_vjp_call_jaxpr": "fun_jaxpr",
          "remat": "jaxpr", "remat2": "jaxpr", "checkpoint": "jaxpr"}


def _inline_target(eqn, ins: list):
    """(inner jaxpr, its consts, its args) for call-like equations, else None."""
    name = eqn.primitive.name
    if name == "cond":
        index = ins[0]
        if not isinstance(index, _Const):
            raise UnsupportedPrimitiveError(
                "lax.cond/switch whose branch depends on the observation cannot be exported; "
                "compute both branches and select with jnp.where.")
        branch = eqn.params["branches"][int(np.asarray(index.val))]
        return branch.jaxpr, branch.consts, ins[1:]
    key = _CALLS.get(name)
    if key is None:
        return None
    sub = eqn.params[key]
    if isinstance(sub, jcore.ClosedJaxpr):
        return sub.jaxpr, sub.consts, ins
    return sub, [], ins


_IDENTITY = {"stop_gradient", "copy", "copy_p", "sharding_constraint", "optimization_barrier",
             "pvary", "mesh_cast", "reshard"}
_UNARY = {"neg": "Neg", "abs": "Abs", "exp": "Exp", "log": "Log", "sqrt": "Sqrt",
          "tanh": "Tanh", "logistic": "Sigmoid", "erf": "Erf", "sin": "Sin", "cos": "Cos",
          "tan": "Tan", "asin": "Asin", "acos": "Acos", "atan": "Atan", "sinh": "Sinh",
          "cosh": "Cosh", "asinh": "Asinh", "acosh": "Acosh", "atanh": "Atanh",
          "floor": "Floor", "ceil": "Ceil", "sign": "Sign", "not": "Not"}
_BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "max": "Max", "min": "Min",
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
            w = _Const(np.asarray(w.val).T) if isinstance(w, _Const) else g.op(
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
    if not all(isinstance(x, _Const) for x in ins[1:]):
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


_HANDLERS: dict[str, Callable] = {
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
}


def supported_primitives() -> tuple[str, ...]:
    """Names of the primitives the converter maps or inlines (sorted)."""
    names = set(_HANDLERS) | set(_UNARY) | set(_BINARY) | _IDENTITY | set(_CALLS) | {"cond"}
    return tuple(sorted(names))
