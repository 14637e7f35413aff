"""Control flow (spec 2.16: COND_IF, WHILE_LOOP) and variables (2.17: VARIABLE,
VARIABLE_WRITE, VARIABLE_READ).

Sub-graphs run through the interpreter: ``ctx.interpreter.run_block(block, values,
caller=op)`` returns the block's outputs.  ``then_graph``/``else_graph``/``cond_graph``/
``body_graph`` name a region (TOSA 1.0) or a block (draft); :meth:`tosa_ir.Graph.block`
resolves both.  The spec's ``tosa_nesting_depth`` is ``ctx.interpreter.nesting_depth``,
maintained here.

Variables (draft form: ``uid`` attributes) are :class:`Variable` records in the
interpreter's ``variables`` dict, keyed by uid, which persists across runs when the caller
passes the same dict.  The spec clears every variable's ``seen`` flag at the start of each
graph execution; a record here keeps the identity of the execution that declared it
instead (the interpreter object and its ``run_count``: one dict may be shared by several
interpreters).  TOSA 1.0 graphs express variables differently (tensors flagged
``variable``, written and read by IDENTITY); that form is the interpreter's tensor storage.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.reference.ops_support import MAX_NESTING_NONE, int_list, level_rank, shapes_match
from sim.reference.registry import register
from tosa_ir import numpy_dtype

# var_t enumerants (spec 3.3) and our element-type names.
VAR_TYPES = {"BOOLEAN": "bool", "BOOL": "bool", "INT8": "int8", "INT16": "int16",
             "INT32": "int32", "FP16": "fp16", "BF16": "bf16", "FP32": "fp32"}
VAR_TYPE_CODES = ["bool", "int8", "int16", "int32", "fp16", "bf16", "fp32"]


@dataclass
class Variable:
    """A persistent variable tensor (spec 4.2.4 variable_tensor_allocate)."""

    shape: tuple[int, ...]
    dtype: str
    data: np.ndarray
    is_written: bool = False
    seen_in: tuple | None = None  # execution that declared it (the "seen" flag)


def _max_nesting(ctx) -> int:
    limits = ctx.limits
    return MAX_NESTING_NONE if limits is None else limits["MAX_NESTING"]


def _sub_block(ctx, attr: str):
    name = ctx.attr(attr)
    ctx.error_if(name is None, attr, f"{attr} is missing")
    try:
        return ctx.graph.block(name)
    except KeyError:
        ctx.error_if(True, attr, f"{attr} names no block or region {name!r}")


def _list_matches(block, names, shapes_types) -> bool:
    """tensor_list_shape (and element types) of ``shapes_types`` == the block's list ``names``.

    Exact: a sub-graph's declared input shape with an unknown (-1) dimension does not match
    a known one (the spec compares the shape lists; the official reference model rejects
    such a COND_IF, e.g. the generator's CondIfInputListElseGraphMismatch test with an else
    graph taking a (-1, -1) input)."""
    if len(names) != len(shapes_types):
        return False
    for name, (shape, dtype) in zip(names, shapes_types):
        t = block.tensors.get(name)
        if t is None or t.dtype != dtype or tuple(t.shape) != tuple(shape):
            return False
    return True


def _declared(ctx, names):
    """(shape, type) of tensors of the operator's own block."""
    return [(ctx.block.tensor(n).shape, ctx.block.tensor(n).dtype) for n in names]


def _run(ctx, block, values):
    """tosa_execute_graph of a sub-graph: its outputs as a list, in block output order."""
    interp = ctx.interpreter
    depth = interp.nesting_depth
    ctx.error_if(depth >= _max_nesting(ctx), "graph", "tosa_nesting_depth >= MAX_NESTING")
    interp.nesting_depth = depth + 1
    try:
        outputs = interp.run_block(block, list(values), caller=ctx.op)
    finally:
        interp.nesting_depth = depth
    if isinstance(outputs, dict):
        outputs = [outputs[name] for name in block.outputs]
    return list(outputs)


@register("COND_IF")
def cond_if(ctx, inputs):
    cond, values = np.asarray(inputs[0]), list(inputs[1:])
    then_b, else_b = _sub_block(ctx, "then_graph"), _sub_block(ctx, "else_graph")
    ctx.error_if(ctx.in_type(0) != "bool", "condition", "condition type != bool_t")
    level_rank(ctx, cond.shape)
    in_list = [(np.shape(v), ctx.in_type(i + 1)) for i, v in enumerate(values)]
    out_list = _declared(ctx, ctx.op.outputs)
    ctx.error_if(not _list_matches(then_b, then_b.inputs, in_list), "then_graph",
                 "tensor_list_shape(input_list) != tosa_input_shape(then_graph)")
    ctx.error_if(not _list_matches(else_b, else_b.inputs, in_list), "else_graph",
                 "tensor_list_shape(input_list) != tosa_input_shape(else_graph)")
    ctx.error_if(not _list_matches(then_b, then_b.outputs, out_list), "then_graph",
                 "tensor_list_shape(output_list) != tosa_output_shape(then_graph)")
    ctx.error_if(not _list_matches(else_b, else_b.outputs, out_list), "else_graph",
                 "tensor_list_shape(output_list) != tosa_output_shape(else_graph)")
    ctx.error_if(cond.size != 1, "condition", "tensor_size(shape) != 1")
    block = then_b if bool(cond.reshape(-1)[0]) else else_b
    return _run(ctx, block, values)


@register("WHILE_LOOP")
def while_loop(ctx, inputs):
    values = list(inputs)
    cond_b, body_b = _sub_block(ctx, "cond_graph"), _sub_block(ctx, "body_graph")
    in_list = [(np.shape(v), ctx.in_type(i)) for i, v in enumerate(values)]
    out_list = _declared(ctx, ctx.op.outputs)
    ctx.error_if(len(in_list) != len(out_list) or any(
        t_in != t_out or not shapes_match(s_out, s_in)
        for (s_in, t_in), (s_out, t_out) in zip(in_list, out_list)), "output_list",
        "tensor_list_shape(input_list) != tensor_list_shape(output_list)")
    ctx.error_if(not _list_matches(cond_b, cond_b.inputs, in_list), "cond_graph",
                 "tensor_list_shape(input_list) != tosa_input_shape(cond_graph)")
    ctx.error_if(not _list_matches(body_b, body_b.inputs, in_list), "body_graph",
                 "tensor_list_shape(input_list) != tosa_input_shape(body_graph)")
    ctx.error_if(not _list_matches(body_b, body_b.outputs, in_list), "body_graph",
                 "tensor_list_shape(input_list) != tosa_output_shape(body_graph)")
    ctx.error_if(len(cond_b.outputs) != 1, "cond_graph", "cond_graph must have one output")
    cond_out = cond_b.tensor(cond_b.outputs[0])
    ctx.error_if(cond_out.size != 1, "cond_graph",
                 "tensor_size(tosa_output_shape(cond_graph)) != 1")
    ctx.error_if(cond_out.dtype != "bool", "cond_graph", "tosa_output_type(cond_graph) != bool_t")

    def condition(current):
        return bool(np.asarray(_run(ctx, cond_b, current)[0]).reshape(-1)[0])

    while condition(values):
        # The interpreter's iteration budget: a condition that never turns false ends
        # with a clear error instead of a hang.
        ctx.interpreter.count_loop_iteration(ctx.op)
        values = _run(ctx, body_b, values)
    return values


# --- variables ------------------------------------------------------------------------------

def _var_type(ctx, value) -> str:
    if isinstance(value, str):
        name = value.split(".")[-1]
        dtype = VAR_TYPES.get(name.upper(), name.lower())
    elif value is not None:
        dtype = VAR_TYPE_CODES[int(value)] if 0 <= int(value) < len(VAR_TYPE_CODES) else ""
    else:
        dtype = ""
    ctx.error_if(dtype not in VAR_TYPE_CODES, "type", f"type {value!r} is not a var_t")
    return dtype


def _uid(ctx) -> int:
    uid = ctx.attr("uid")
    ctx.error_if(uid is None, "uid", "uid is missing")
    return int(uid)


def _execution(ctx) -> tuple:
    """An identifier of the current graph execution, unique across interpreters."""
    interp = ctx.interpreter
    token = getattr(interp, "_variable_token", None)
    if token is None:
        # A fresh object per interpreter; records holding it keep it alive, so a later
        # interpreter can never receive an equal token.
        token = interp._variable_token = object()
    return (token, interp.run_count)


def _lookup(ctx, uid: int) -> Variable | None:
    var = ctx.interpreter.variables.get(uid)
    return var if isinstance(var, Variable) else None


@register("VARIABLE")
def variable(ctx, inputs):
    uid = _uid(ctx)
    shape = tuple(int_list(ctx.attr("var_shape", [])))
    dtype = _var_type(ctx, ctx.attr("type"))
    level_rank(ctx, shape)
    run = _execution(ctx)
    var = _lookup(ctx, uid)
    if var is None:  # first declaration: variable_tensor_allocate
        ctx.require(all(d >= 1 for d in shape), "1 <= var_shape[i] (tensor_size)")
        var = Variable(shape, dtype, np.zeros(shape, dtype=numpy_dtype(dtype)))
        initial = ctx.attr("initial_value")
        if initial is not None:
            initial = np.asarray(initial)
            # in_t of initial_value: its declared type if the graph gives one, else the
            # element type its numpy type holds.
            init_type = ctx.attr("initial_value_type")
            same_type = (init_type == dtype if init_type is not None
                         else initial.dtype == numpy_dtype(dtype))
            ctx.require(same_type, "var_t == in_t")
            ctx.require(tuple(initial.shape) == shape, "var_shape == shape")
            var.data = initial.astype(numpy_dtype(dtype), copy=True)
            var.is_written = True
        ctx.interpreter.variables[uid] = var
    else:
        ctx.require(var.seen_in != run, "!var_tensor.seen")
    var.seen_in = run
    return []


@register("VARIABLE_WRITE")
def variable_write(ctx, inputs):
    uid = _uid(ctx)
    value = np.asarray(inputs[0])
    level_rank(ctx, value.shape)
    var = _lookup(ctx, uid)
    ctx.require(var is not None, "variable_tensor != NULL (declared)")
    ctx.require(var.seen_in == _execution(ctx), "variable_tensor.seen")
    ctx.require(tuple(value.shape) == var.shape, "variable_tensor.shape == shape")
    ctx.require(ctx.in_type(0) == var.dtype, "variable_tensor.type == in_t")
    var.data = value.astype(numpy_dtype(var.dtype), copy=True)
    var.is_written = True
    return []


@register("VARIABLE_READ")
def variable_read(ctx, inputs):
    uid = _uid(ctx)
    shape, dtype = ctx.out_shape(), ctx.out_type()
    level_rank(ctx, shape)
    var = _lookup(ctx, uid)
    ctx.require(var is not None, "variable_tensor != NULL")
    ctx.require(var.is_written, "variable_tensor.is_written")
    ctx.require(shapes_match(shape, var.shape), "variable_tensor.shape == shape")
    ctx.require(var.dtype == dtype, "variable_tensor.type == out_t")
    return [var.data.copy()]
