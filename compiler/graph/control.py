"""Control flow inside one straight-line program (the single-program pipeline,
compiler/driver.py ``run_pipeline``).

* COND_IF with a constant condition: the chosen branch is inlined.
* COND_IF with a computed condition: *if-conversion*: both branches are inlined (they have
  no side effects) and every result is ``SELECT(condition, then, else)``, the condition
  broadcast to the result's rank.  (COND_IFs with big branches are lowered with BRANCH
  instead, by compiler/link/control.py, which compile_graph routes them to.)
* WHILE_LOOP: lowered with the sequencer's BRANCH by compiler/link/control.py
  (compile_graph); here, in one straight-line program, it is Unsupported (the message
  says why).

:func:`inline_control_flow` returns a graph whose main block has no control flow (the
original is untouched); branch tensors are renamed ``<op name>/<branch>/<tensor>``.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from tosa_ir import Block, Graph, Operator, Tensor

from compiler.core.errors import invalid, unsupported

CONTROL_OPS = ("COND_IF", "WHILE_LOOP")


def inline_control_flow(graph: Graph) -> Graph:
    """``graph`` with its main block's COND_IFs inlined (WHILE_LOOP: Unsupported)."""
    main = graph.main
    if not any(op.op in CONTROL_OPS for op in main.operators):
        return graph
    block = Block(main.name, dict(main.tensors), [], list(main.inputs), list(main.outputs))
    pending = list(main.operators)
    count = 0
    while pending:
        op = pending.pop(0)
        if op.op == "WHILE_LOOP":
            raise unsupported(op, "a WHILE_LOOP is linked from separately compiled pieces with BRANCH "
                                  "(compiler/link/control.py, compile_graph); the single-program "
                                  "pipeline (run_pipeline, estimates) cannot hold one")
        if op.op != "COND_IF":
            block.operators.append(op)
            continue
        count += 1
        tag = f"cond_if{count}"
        try:
            then_b, else_b = graph.block(op.attrs["then_graph"]), graph.block(op.attrs["else_graph"])
        except KeyError as e:
            raise invalid(op, f"branch block missing: {e}") from None
        cond = block.tensors.get(op.inputs[0])
        if cond is None:
            raise invalid(op, f"condition {op.inputs[0]!r} is not declared")
        if cond.is_const:
            chosen = then_b if bool(np.asarray(cond.data).reshape(-1)[0]) else else_b
            outs, ops = _inline(block, chosen, op, f"{tag}/{chosen.name}")
            pending[:0] = ops + [Operator("IDENTITY", [o], [y], {}, op.location) for o, y in zip(outs, op.outputs)]
            continue
        then_outs, then_ops = _inline(block, then_b, op, f"{tag}/then")
        else_outs, else_ops = _inline(block, else_b, op, f"{tag}/else")
        selects = []
        for k, (a, b, y) in enumerate(zip(then_outs, else_outs, op.outputs)):
            rank = len(block.tensor(y).shape)
            c = f"{tag}/cond{k}"
            block.add_tensor(Tensor(c, (1,) * rank, "bool"))
            shape = f"{tag}/shape{k}"
            block.add_tensor(Tensor(shape, (rank,), "shape", np.ones(rank, np.int64)))
            selects.append(Operator("RESHAPE", [op.inputs[0], shape], [c], {}, op.location))
            selects.append(Operator("SELECT", [c, a, b], [y], {}, op.location))
        pending[:0] = then_ops + else_ops + selects
    return replace(graph, regions=[replace(graph.regions[0], blocks=[block])] + list(graph.regions[1:]))


def _inline(block: Block, branch: Block, op: Operator, prefix: str) -> tuple[list[str], list[Operator]]:
    """(names of ``branch``'s results in ``block``, its operators renamed); its tensors are
    added to ``block``."""
    values = op.inputs[1:]
    if len(values) != len(branch.inputs):
        raise invalid(op, f"{len(values)} values for the {len(branch.inputs)} inputs of block {branch.name!r}")
    names = dict(zip(branch.inputs, values))
    for name, t in branch.tensors.items():
        if name not in names:
            names[name] = f"{prefix}/{name}"
            block.add_tensor(Tensor(names[name], t.shape, t.dtype, t.data))

    def rename(n: str) -> str:
        return names.get(n, n)      # a parent's tensor keeps its name

    ops = [Operator(o.op, [rename(i) for i in o.inputs], [rename(x) for x in o.outputs], dict(o.attrs),
                    o.location) for o in branch.operators]
    return [rename(o) for o in branch.outputs], ops
