"""Elementwise chains as one layer: a producer's steps run in the consumer's tiles.

TOSA graphs from converters spell one integer operation as a chain of elementwise
operators: a residual ADD of two int8 tensors is RESCALE(a), RESCALE(b) to int32, ADD,
RESCALE to int8, CLAMP (TFLite's converter; ResNet-50 has 16 of them, MobileNetV2 10); a
softmax is ~50 of them.  Lowered one layer each, every intermediate makes a round trip
through external memory, and int32 ones are four times the bytes of the int8 tensors
around them: ResNet-50 spent 15.8 M of its 34.3 M cycles in such layers, bus-bound.

:func:`fuse_elementwise` merges an :class:`EltLayer` ``A`` into the :class:`EltLayer`
``B`` that reads its output ``t`` when nothing else needs ``t`` in memory: ``B``'s tiles
load ``A``'s inputs and run ``A``'s steps into a temporary that ``B``'s steps read instead
of ``t``, so ``t`` is never stored (int32 temporaries in ACC, where a vector is one row
instead of ASRAM's four: the vector unit spends a cycle per row).  The values are the same bits (the temporary
holds exactly what ``t`` would), only the traffic goes.  Conditions, each the reason a
merge could change a result or a layout:

* ``A`` and ``B`` compute the same output shape, and ``B`` reads ``t`` whole (no window):
  both run over one loop nest, ``A``'s inputs broadcast against it as before;
* ``t`` is its own root buffer (not a view, not a slot of a concatenation), no graph output
  and no other layer reads it or a view of it;
* at most one of the two has per-channel RESCALE parameters and at most one a TABLE (one
  parameter table per column, one TSRAM image per layer); per-tensor parameter sets
  become extra PSRAM row pairs (:attr:`EltLayer.scalar_params`, ``Step.param``);
* no layer between ``A`` and ``B`` writes a buffer ``A`` reads (``A``'s reads move to
  ``B``'s place in the order).

Merging repeats until nothing merges, so a whole chain (and a tree: both RESCALEs into
the ADD) becomes one layer, of at most ``MAX_STEPS`` steps.
"""
from __future__ import annotations

import bisect
import re
from dataclasses import replace

from isa.instructions import ValuOp, VecType

from compiler.core.dataflow import Dataflow
from compiler.kinds.elementwise.layer import EltLayer, Step

__all__ = ["fuse_elementwise"]

# Steps of one merged layer at most: every merged intermediate is a temporary of the tile, so
# an unbounded chain (10,000 CLAMPs) would leave tiles of one vector, or none (ACC
# temporaries), and merging it would take quadratic time.  TFLite's residual ADD is 5
# operators, its int8 softmax tail about 50.
MAX_STEPS = 64


def fuse_elementwise(flow: Dataflow) -> Dataflow:
    """Merge elementwise chains of ``flow`` in place (and return it).

    One pass over the layers in order, each consumer ``B`` taking in its mergeable producers
    (the earliest first, until none is left): a producer's own merges are done by then, as it
    comes earlier.  Readers and writers are kept as indices that merging updates, so the pass
    costs time linear in the graph (a chain of 10,000 CLAMPs: each merge looks at the two
    layers it joins), where rescanning the graph after every merge was quadratic."""
    layers: list = list(flow.layers)               # None where a layer was merged away
    readers: dict[str, set[int]] = {}
    writers: dict[str, list[int]] = {}             # root name -> indices of layers writing it
    producer: dict[str, int] = {}                  # elementwise output -> its layer's index
    for k, layer in enumerate(layers):
        for name in layer.reads:
            readers.setdefault(name, set()).add(k)
        for name in layer.writes:
            writers.setdefault(flow.root_of(name).name, []).append(k)
        if type(layer) is EltLayer:
            producer[layer.output] = k
    viewed = {ref.parent for name, ref in flow.refs.items() if not ref.root}
    bound = {binding.tensor for binding in flow.outputs + flow.inputs}

    def mergeable(i: int, j: int) -> bool:
        a, b = layers[i], layers[j]
        t = a.output
        if readers.get(t) != {j} or t in viewed or t in bound:
            return False
        ref = flow.refs.get(t)
        if ref is None or not ref.root or ref.parent != t or flow.roots[t].kind != "computed":
            return False
        if a.out_shape != b.out_shape or any(b.inputs[k] == t for k in b.windows):
            return False
        if len(a.steps) + len(b.steps) > MAX_STEPS:
            return False
        if (a.per_channel and b.per_channel) or (a.table is not None and b.table is not None):
            return False
        # Nothing between them writes what A reads: A's reads move to B's place.
        for root in {flow.root_of(name).name for name in a.reads}:
            ks = writers.get(root, ())
            at = bisect.bisect_right(ks, i)
            if at < len(ks) and ks[at] < j:
                return False
        return True

    for j, b in enumerate(layers):
        if type(b) is not EltLayer:
            continue
        while True:
            producers = sorted({producer[name] for name in b.reads if name in producer} - {j})
            i = next((i for i in producers if layers[i] is not None and i < j and mergeable(i, j)), None)
            if i is None:
                break
            a = layers[i]
            merged = _merge(a, b)
            for name in set(a.reads) | set(b.reads):
                readers[name] -= {i, j}
            for name in merged.reads:
                readers.setdefault(name, set()).add(j)
            del producer[a.output]
            readers.pop(a.output, None)
            layers[i], layers[j], b = None, merged, merged
            for table in (flow.roots, flow.refs, flow.shapes):
                table.pop(a.output, None)
    flow.layers[:] = [layer for layer in layers if layer is not None]
    return flow


def _merge(a: EltLayer, b: EltLayer) -> EltLayer:
    """The layer computing ``b`` with ``a``'s steps in front (module docstring)."""
    main, sets = None, []           # per-channel parameters stay the layer's own rows

    def params_of(layer: EltLayer) -> dict:
        """Step.param of the layer's main-parameter steps in the merged layer."""
        nonlocal main
        if layer.params is None:
            return {}
        if layer.per_channel:
            main = layer
            return {None: None}
        sets.append((int(layer.params[0].reshape(-1)[0]), int(layer.params[1].reshape(-1)[0])))
        return {None: len(sets) - 1}

    def renamed(layer: EltLayer, prefix: str, names: dict, shift: int, moved: dict) -> list[Step]:
        def to(x: str) -> str:
            if x in names:
                return names[x]
            return x if x == "out" or re.fullmatch(r"in\d+", x) else f"{prefix}{x}"
        steps = []
        for s in layer.steps:
            param = s.param + shift if s.param is not None else moved.get(None) if s.name == "VRESCALE" else None
            steps.append(replace(s, srcs=tuple(to(x) for x in s.srcs), dst=to(s.dst), param=param))
        return steps

    temp = f"{a.name}.out"
    # a's inputs keep their indices; b's come after them, t replaced by the temporary.
    inputs = list(a.inputs)
    b_names = {}
    for k, name in enumerate(b.inputs):
        if name == a.output:
            b_names[f"in{k}"] = temp
            continue
        b_names[f"in{k}"] = f"in{len(inputs)}"
        inputs.append(name)
    a_names = {"out": temp}
    a_temps = {f"a.{x}": mem for x, mem in a.temps.items()}
    b_temps = {f"b.{x}": mem for x, mem in b.temps.items()}

    a_shift = len(sets)
    sets += list(a.scalar_params)
    a_moved = params_of(a)
    b_shift = len(sets)
    sets += list(b.scalar_params)
    b_moved = params_of(b)
    steps = renamed(a, "a.", a_names, a_shift, a_moved) + renamed(b, "b.", b_names, b_shift, b_moved)

    types = {f"in{k}": a.types[f"in{k}"] for k in range(len(a.inputs))}
    for k in range(len(b.inputs)):
        if b_names[f"in{k}"] != temp:
            types[b_names[f"in{k}"]] = b.types[f"in{k}"]
    types[temp] = a.types["out"]
    types.update({f"a.{x}": a.types[x] for x in a.temps})
    types.update({f"b.{x}": b.types[x] for x in b.temps})
    types["out"] = b.types["out"]
    # An int32 intermediate in ACC: one row per vector there, four in ASRAM, and the vector
    # unit spends a cycle per row (isa/vector.py), so each step touching it is 4x faster.
    # (Not as a SELECT's value operand: b and c share strides, so they share a row count.)
    selected = any(x == temp for st in steps if st.name == "VALU" and st.fields.get("op") == ValuOp.SELECT
                   for x in st.srcs[1:])
    wide = a.types["out"] == VecType.INT32 and not selected
    temps = {**a_temps, temp: "ACC" if wide else "ASRAM", **b_temps}
    windows = dict(a.windows)
    windows.update({int(b_names[f"in{k}"][2:]): w for k, w in b.windows.items()})
    steps = _fold_clamps(steps, temps, types)
    return EltLayer(b.name, inputs, b.output, b.out_shape, types, temps, steps,
                    params=main.params if main is not None else None, per_channel=main is not None,
                    table=a.table if a.table is not None else b.table, windows=windows,
                    consts=a.consts + b.consts, ops=a.ops + b.ops, location=a.location or b.location,
                    scalar_params=sets)


def _fold_clamps(steps: list[Step], temps: dict, types: dict) -> list[Step]:
    """A VRESCALE whose result only a CLAMP of the same type reads does the clamp itself
    (its ``clamp`` fields: after the type range, as TOSA's CLAMP of the rescaled value), one
    vector step less: the residual ADD's RESCALE to int8 and ReLU."""
    steps = list(steps)
    k = 0
    while k < len(steps):
        s = steps[k]
        x = s.dst
        readers = [i for i, t in enumerate(steps) if x in t.srcs]
        if s.name == "VRESCALE" and not s.fields.get("clamp") and x in temps and len(readers) == 1:
            i = readers[0]
            c = steps[i]
            between = steps[k + 1:i]
            if (c.name == "VALU" and c.fields.get("op") == ValuOp.CLAMP and c.fields["dtype"] == s.fields["out_type"]
                    and not any(c.dst in t.srcs or t.dst == c.dst for t in between)):
                steps[k] = replace(s, fields=dict(s.fields, clamp=1, clamp_min=c.fields["imm0"],
                                                  clamp_max=c.fields["imm1"]), dst=c.dst)
                del steps[i]
                temps.pop(x)
                types.pop(x)
                continue
        k += 1
    return steps
