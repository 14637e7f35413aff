"""Test helpers: graphs of elementwise (vector-unit) operators in the TOSA 1.0 form, input
values that keep every REQUIRE of the reference interpreter, and a compile-run-compare
check on the ISA simulator against the reference interpreter (sim.reference)."""
from __future__ import annotations

import numpy as np

from tosa_ir import Block, Graph, Operator, Tensor

from compiler.driver import run_pipeline

from npu_check import compare_on_isa

INT_RANGE = {"bool": (0, 1), "int8": (-128, 127), "int16": (-32768, 32767), "int32": (-(1 << 31), (1 << 31) - 1),
             "int48": (-(1 << 47), (1 << 47) - 1)}
NP = {"bool": np.bool_, "int8": np.int8, "int16": np.int16, "int32": np.int32, "int48": np.int64}


class VecBuilder:
    """A main block built operator by operator (TOSA 1.0 operands: MUL's shift, NEGATE's and
    RESCALE's zero points and RESCALE's parameters as constant input tensors)."""

    def __init__(self, rng: np.random.Generator, name: str = "vec"):
        self.rng, self.name = rng, name
        self.block = Block("main")
        self.count = 0
        self.ranges: dict[str, tuple[int, int]] = {}   # graph input -> value range

    def tensor(self, shape, dtype, data=None) -> str:
        name = f"t{self.count}"
        self.count += 1
        self.block.add_tensor(Tensor(name, tuple(shape), dtype, data))
        return name

    def input(self, shape, dtype, lo=None, hi=None) -> str:
        name = self.tensor(shape, dtype)
        self.block.inputs.append(name)
        r = INT_RANGE[dtype]
        self.ranges[name] = (r[0] if lo is None else lo, r[1] if hi is None else hi)
        return name

    def const(self, data: np.ndarray, dtype: str) -> str:
        return self.tensor(np.shape(data), dtype, np.asarray(data, NP.get(dtype, np.int64)))

    def op(self, kind: str, inputs: list[str], shape, dtype: str, **attrs) -> str:
        out = self.tensor(shape, dtype)
        self.block.operators.append(Operator(kind, list(inputs), [out], attrs,
                                             f"{self.name}:{kind.lower()}{len(self.block.operators)}"))
        return out

    def shape(self, t: str) -> tuple[int, ...]:
        return tuple(self.block.tensor(t).shape)

    def dtype(self, t: str) -> str:
        return self.block.tensor(t).dtype

    # -- operators with parameters --------------------------------------------------------
    def mul(self, a: str, b: str, shift: int = 0) -> str:
        shape = tuple(np.broadcast_shapes(self.shape(a), self.shape(b)))
        return self.op("MUL", [a, b, self.const([shift], "int8")], shape, "int32")

    def negate(self, x: str, izp: int = 0, ozp: int = 0) -> str:
        t = self.dtype(x)
        return self.op("NEGATE", [x, self.const([izp], t), self.const([ozp], t)], self.shape(x), t)

    def rescale(self, x: str, out_dtype: str, multiplier, shift, izp=0, ozp=0, scale32=True,
                double_round=False, per_channel=False, input_unsigned=False, output_unsigned=False) -> str:
        in_t = self.dtype(x)
        inputs = [x, self.const(np.asarray(multiplier).reshape(-1), "int32" if scale32 else "int16"),
                  self.const(np.asarray(shift).reshape(-1), "int8"),
                  self.const([izp], in_t), self.const([ozp], out_dtype)]
        return self.op("RESCALE", inputs, self.shape(x), out_dtype, scale32=scale32,
                       rounding_mode="DOUBLE_ROUND" if double_round else "SINGLE_ROUND",
                       per_channel=per_channel, input_unsigned=input_unsigned, output_unsigned=output_unsigned)

    def graph(self, outputs: list[str]) -> Graph:
        self.block.outputs = list(outputs)
        return Graph.single_block(self.block, version=(1, 0, 0, False), source=f"{self.name}.tosa")

    def inputs(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        out = {}
        for name in self.block.inputs:
            t = self.block.tensor(name)
            lo, hi = self.ranges[name]
            out[name] = rng.integers(lo, hi, t.shape, endpoint=True).astype(NP[t.dtype])
        return out


def run_and_compare(graph: Graph, inputs: dict, config, check_hazards: bool = True):
    """Compile ``graph``, run it on the ISA simulator, compare every output bit-exactly with
    the reference interpreter; returns the compilation."""
    comp = run_pipeline(graph, config)
    compare_on_isa(comp.program, graph, inputs, config, check_hazards=check_hazards, same_dtype=False)
    return comp


def while_loop_graph() -> Graph:
    """``while i > 0: i -= 1; x += x`` on inputs i [1] and x [2] (int32): a loop whose trip
    count comes from a graph input."""
    from tosa_ir import Region

    b = Block("main", inputs=["i", "x"], outputs=["i2", "x2"])
    for name in ("i", "i2"):
        b.add_tensor(Tensor(name, (1,), "int32"))
    for name in ("x", "x2"):
        b.add_tensor(Tensor(name, (2,), "int32"))
    b.operators = [Operator("WHILE_LOOP", ["i", "x"], ["i2", "x2"], {"cond_graph": "C", "body_graph": "B"},
                            "m:while0")]
    cond = Block("C", inputs=["i", "x"], outputs=["go"])
    body = Block("B", inputs=["i", "x"], outputs=["j", "y"])
    for blk in (cond, body):
        blk.add_tensor(Tensor("i", (1,), "int32"))
        blk.add_tensor(Tensor("x", (2,), "int32"))
    cond.add_tensor(Tensor("zero", (1,), "int32", np.zeros(1, np.int32)))
    cond.add_tensor(Tensor("go", (1,), "bool"))
    cond.operators = [Operator("GREATER", ["i", "zero"], ["go"], {}, "m:C")]
    body.add_tensor(Tensor("one", (1,), "int32", np.ones(1, np.int32)))
    body.add_tensor(Tensor("j", (1,), "int32"))
    body.add_tensor(Tensor("y", (2,), "int32"))
    body.operators = [Operator("SUB", ["i", "one"], ["j"], {}, "m:B0"), Operator("ADD", ["x", "x"], ["y"], {}, "m:B1")]
    return Graph([Region("main", [b]), Region("C", [cond]), Region("B", [body])], source="m.tosa")
