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
       clipping bounds and key splitting vanish. Equal constants share one initializer.
    3. Call-like primitives (`jit`/`pjit`, `closed_call`, `core_call`, `custom_jvp_call`,
       `custom_vjp_call`, `remat`/`checkpoint`, and `cond` with a constant branch index) are
       inlined; `stop_gradient` and sharding annotations become `Identity`.
    4. `scan` (a flow policy's K-step sampler, `jaxrl.learning.flow.integrate`) is unrolled:
       the body is interpreted `length` times (in reverse order for `reverse=True`), the carry
       threaded through, `xs` sliced per iteration (`Gather`, or folded when constant) and the
       per-step outputs `ys` stacked (`Unsqueeze` + `Concat`). Folding runs per iteration, so
       a sampler's time grid and Fourier time features become constants; the graph holds the
       velocity network K (Euler) or 2K (midpoint) times with one copy of its parameters.
       Carries and `ys` no output depends on are dropped. An unrolled graph is exact (the same
       ops in the same order as XLA's loop) and needs no ONNX control flow (`Loop`).
    5. Every other equation maps to ONNX nodes through `onnx_ops.HANDLERS` (standard opset 17
       ops only: MatMul/Einsum, elementwise math, Where, Reshape/Expand/Concat/Slice/Gather,
       reductions). An equation with constant indices that only moves data (`gather`,
       `dynamic_slice`, `rev`, `dynamic_update_slice`, `scatter`) becomes one `Gather`, its
       indices computed by running the same primitive on an index array. A primitive with no
       handler (e.g. `while`, `sort`, `erf_inv`) raises `UnsupportedPrimitiveError` naming it.

Shapes are the traced ones (fixed batch size). Numerics follow ONNX Runtime's kernels; `log1p`
and `expm1` are computed as `log(1 + x)` and `exp(x) - 1` (absolute error below 2e-7).
Sources: ONNX operator specs (onnx.ai/onnx/operators, opset 17); JAX `jax.core.eval_jaxpr`
for the interpretation loop; lax primitive semantics from `jax/_src/lax/lax.py` and the `scan`
primitive's parameters (`num_consts`, `num_carry`, `length`, `reverse`) from
`jax/_src/lax/control_flow/loops.py`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from jax.extend import core as jcore

from jaxrl.deploy import onnx_ops
from jaxrl.deploy.onnx_ops import (
    IR_VERSION,
    OPSET,
    Const,
    Graph,
    UnsupportedPrimitiveError,
    helper,  # helper and onnx are None without the `export` extra
    onnx,
)

__all__ = ["IR_VERSION", "OPSET", "UnsupportedPrimitiveError", "jaxpr_to_onnx",
           "supported_primitives", "used_inputs"]


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
                          f"pip install -e '.[export]' ({onnx_ops.ONNX_IMPORT_ERROR}).")
    jaxpr = closed.jaxpr
    if len(input_names) != len(jaxpr.invars) or len(output_names) != len(jaxpr.outvars):
        raise ValueError(f"{len(jaxpr.invars)} inputs / {len(jaxpr.outvars)} outputs traced, "
                         f"got {len(input_names)} / {len(output_names)} names.")
    g = Graph(list(input_names) + list(output_names))
    outs = _interpret(g, jaxpr, [Const(c) for c in closed.consts], list(input_names))
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


def _interpret(g: Graph, jaxpr: jcore.Jaxpr, consts: list, args: list,
               needed_outputs: Sequence[bool] | None = None) -> list:
    """Runs `jaxpr` symbolically: values are ONNX tensor names or `Const`s (None for outputs
    that are not needed)."""
    env: dict = {}

    def read(v):
        if isinstance(v, jcore.Literal):
            return Const(np.asarray(v.val, v.aval.dtype))
        return env[v]

    env.update(zip(jaxpr.constvars, consts, strict=True))
    env.update(zip(jaxpr.invars, args, strict=True))
    live = _live_vars(jaxpr, needed_outputs)
    for eqn in jaxpr.eqns:
        wanted = [v in live for v in eqn.outvars if not isinstance(v, jcore.DropVar)]
        if not any(wanted):
            continue
        ins = [read(v) for v in eqn.invars]
        if all(isinstance(x, Const) for x in ins):
            outs = [Const(o) for o in _evaluate(eqn, [x.val for x in ins])]
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


def _convert(g: Graph, eqn, ins: list, needed: list[bool]) -> list:
    """ONNX values for the outputs of one observation-dependent equation."""
    name = eqn.primitive.name
    sub = _inline_target(eqn, ins)
    if sub is not None:
        inner, consts, args = sub
        return _interpret(g, inner, [Const(c) for c in consts], args, needed)
    if name == "scan":
        return _scan(g, eqn, ins, needed)
    if name in onnx_ops.IDENTITY:
        return [g.op("Identity", g.name_of(x)) for x in ins[: len(eqn.outvars)]]
    if name in onnx_ops.UNARY:
        return [g.op(onnx_ops.UNARY[name], g.name_of(ins[0]))]
    if name in onnx_ops.BINARY:
        return [g.op(onnx_ops.BINARY[name], g.name_of(ins[0]), g.name_of(ins[1]))]
    handler = onnx_ops.HANDLERS.get(name)
    if handler is None:
        raise UnsupportedPrimitiveError(
            f"JAX primitive {name!r} has no ONNX mapping in jaxrl.deploy.onnx_convert (it depends "
            "on the observation, so it cannot be constant-folded). Add a handler to "
            "jaxrl.deploy.onnx_ops.HANDLERS.")
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
        if not isinstance(index, Const):
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


def _scan(g: Graph, eqn, ins: list, needed: list[bool]) -> list:
    """Unrolls `lax.scan`: the body interpreted `length` times, carries threaded through.

    Body inputs are `consts + carry + xs`, outputs `carry + ys`; `xs` are sliced on axis 0 and
    `ys` stacked on it, iteration `length - 1` first when `reverse`.
    """
    p = eqn.params
    length, reverse = int(p["length"]), bool(p["reverse"])
    body, body_consts, num_consts, num_carry = _scan_body(p)
    consts, carry = ins[:num_consts], list(ins[num_consts:num_consts + num_carry])
    xs = ins[num_consts + num_carry:]
    mask = _scan_outputs_needed(body, num_consts, num_carry, needed)
    ys: list[list] = [[] for _ in mask[num_carry:]]
    for i in (reversed(range(length)) if reverse else range(length)):
        x_i = [onnx_ops.take(g, x, i) for x in xs]
        outs = _interpret(g, body, body_consts, consts + carry + x_i, mask)
        carry = outs[:num_carry]
        for acc, y in zip(ys, outs[num_carry:], strict=True):
            acc.append(y)
    if length == 0:
        return carry + [Const(np.zeros(v.aval.shape, v.aval.dtype))
                        for v in eqn.outvars[num_carry:]]
    stacked = [onnx_ops.stack(g, acc[::-1] if reverse else acc) if m else None
               for acc, m in zip(ys, mask[num_carry:], strict=True)]
    return carry + stacked


def _scan_body(p: dict) -> tuple[jcore.Jaxpr, list, int, int]:
    """(body jaxpr, its consts as `Const`, number of const inputs, number of carries) of a scan
    equation's params. jax <= 0.10 gives a `ClosedJaxpr` with `num_consts` / `num_carry`; jax
    0.11 an open `Jaxpr` and `ft_in`, a flat tree of the inputs whose `unpack()` is
    `(consts, carry, xs)`, each sized by its number of leaves."""
    if "num_consts" in p:
        body = p["jaxpr"]
        return body.jaxpr, [Const(c) for c in body.consts], int(p["num_consts"]), \
            int(p["num_carry"])
    consts, carry, _ = p["ft_in"].unpack()
    return p["jaxpr"], [], len(consts), len(carry)


def _scan_outputs_needed(body: jcore.Jaxpr, num_consts: int, num_carry: int,
                         needed: list[bool]) -> list[bool]:
    """Body outputs to compute: the needed `ys` and carries, and every carry they read (a
    fixed point over iterations)."""
    mask = list(needed)
    while True:
        live = _live_vars(body, mask)
        carry_in = body.invars[num_consts:num_consts + num_carry]
        new = [m or v in live for m, v in zip(mask[:num_carry], carry_in, strict=True)]
        if new == mask[:num_carry]:
            return mask
        mask = new + mask[num_carry:]


def supported_primitives() -> tuple[str, ...]:
    """Names of the primitives the converter maps, inlines or unrolls (sorted)."""
    names = (set(onnx_ops.HANDLERS) | set(onnx_ops.UNARY) | set(onnx_ops.BINARY)
             | onnx_ops.IDENTITY | set(_CALLS) | {"cond", "scan"})
    return tuple(sorted(names))
