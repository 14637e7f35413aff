"""OpenVINO IR (parsed) -> float TOSA 1.0 graph: values, layouts and the driver loop.

Layouts.  OpenVINO is channel-first (NCHW); TOSA's spatial operators are channel-last
(NHWC).  Every OpenVINO output port is held as a :class:`Val`: a TOSA tensor plus the
permutation ``perm`` with ``tosa_tensor == ov_tensor.transpose(perm)``, or a constant
(numpy, OpenVINO order).  Spatial operators produce NHWC values; OpenVINO ``Transpose``
only changes the bookkeeping; a physical TRANSPOSE (or a RESHAPE when only size-1 axes
move) is emitted only where an operator needs another order (reshapes, matmuls, graph
outputs).  Graph inputs and outputs keep the order the IR declares (``layout="ir"``, the
default; ``"nchw"`` is the same): an NCHW model's inputs get a TRANSPOSE to NHWC, which the
compiler turns into the host's layout of the input (free), and a TensorFlow-style NHWC model's
converter-inserted ``Transpose(0, 3, 1, 2)`` cancels in the bookkeeping.  Nothing is guessed
from the graph.  ``layout="nhwc"`` is the caller saying that every rank-4 input and output is
NCHW and wants NHWC at the boundary.

Constants are folded: a layer whose inputs are all constant is evaluated with numpy (shape
sub-graphs such as ``ShapeOf -> Gather -> Concat -> Reshape``, ``Convert`` of compressed
weights, FakeQuantize of weights).  Folded weights keep their integer form
(:class:`~compiler.frontends.openvino.quant.WeightQuant`) for the quantizer.

The float graph uses TOSA 1.0 conventions: zero points are input tensors, MUL takes a shift
tensor, RESHAPE/PAD/SLICE take shape tensors, fully connected layers are RESHAPE + 1x1
CONV2D.  Where OpenVINO rounds a window's output size down and TOSA needs an exact
division, the rows no window reaches come off the end padding or are sliced off the input,
as in the NNEF frontend (:mod:`compiler.frontends.common.windows`); kernels keep their size.

The value bookkeeping is :class:`compiler.frontends.common.graph_builder.LayoutBuilder` (shared
with the NNEF frontend); operator handlers are in :mod:`compiler.frontends.openvino.ops`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.frontends.common import graph_builder
from compiler.frontends.common.graph_builder import NHWC, LayoutBuilder, identity
from compiler.frontends.openvino import post as openvino_post
from compiler.frontends.openvino.bin import WeightsFile
from compiler.frontends.openvino.quant import WeightQuant
from compiler.frontends.openvino.xml import IrModel, Layer
from compiler.graph.quantize.qparams import QParams
from tosa_ir import Graph
from tosa_ir.errors import InvalidInput, NpuError, Unsupported
from tosa_ir.limits import check_elements

# Layers that may take a value held as integer codes (Val.codes).
CODES_PASS = frozenset({"Transpose", "Reshape", "Squeeze", "Unsqueeze", "Convert",
                        "FakeQuantize", "Result"})


def tosa_dtype_of(arr: np.ndarray) -> str:
    """TOSA type that holds a folded constant when it becomes a tensor."""
    if arr.dtype == np.bool_:
        return "bool"
    if np.issubdtype(arr.dtype, np.integer):
        return "int32"
    return "fp32"


@dataclass
class Val(graph_builder.Val):
    """An OpenVINO output port as converted: a TOSA tensor in layout ``perm`` or a constant.

    ``shape`` is the OpenVINO shape.  ``data`` (OpenVINO order) is set for constants,
    with ``quant`` when the constant came from integer codes (quantized weights).
    ``codes`` ("i8"/"u8"/"i16") marks a value that OpenVINO holds as integer codes (an integer
    graph input before its dequantizing FakeQuantize, a graph output after its quantizing
    one): the TOSA tensor holds the real value it stands for.
    """

    quant: WeightQuant | None = None
    codes: str | None = None

    @classmethod
    def const(cls, data, quant: WeightQuant | None = None) -> "Val":
        data = np.asarray(data)
        return cls(tuple(int(d) for d in data.shape), tosa_dtype_of(data), data=data,
                   quant=quant)


class Converter(LayoutBuilder):
    """Builds the float TOSA block from an :class:`IrModel`.

    ``vals`` maps (layer id, output port index) to the port's :class:`Val`.
    """

    def __init__(self, ir: IrModel, weights: WeightsFile | None, layout: str = "ir"):
        if layout not in ("ir", "nhwc", "nchw"):
            raise ValueError(f"layout must be 'ir', 'nhwc' or 'nchw', not {layout!r}")
        super().__init__()
        self.ir = ir
        self.weights = weights
        self.layout = layout
        self.layer: Layer | None = None
        # Activation parameters from FakeQuantize layers, by TOSA tensor name.
        self.given: dict[str, QParams] = {}
        self.given_by: dict[str, str] = {}        # tensor -> the FakeQuantize layer
        # Weight parameters (per output channel) by TOSA weight tensor name.
        self.weight_given: dict[str, QParams] = {}
        self.fake_quantized = False
        # Graph outputs: TOSA name -> (Result layer name, OpenVINO tensor names).
        self.output_info: dict[str, tuple[str, str]] = {}
        # Graph inputs and outputs: TOSA name -> perm with tosa == openvino.transpose(perm).
        self.boundary: dict[str, tuple[int, ...]] = {}
        # Graph inputs OpenVINO takes as integer codes: TOSA name -> "i8" / "u8" / "i16".
        self.code_inputs: dict[str, str] = {}

    # -- messages -------------------------------------------------------------------
    @property
    def where(self) -> str:
        return self.layer.where if self.layer is not None else self.ir.path

    @property
    def location(self) -> str:
        """Stamped on every operator emitted: the current layer."""
        return self.where

    def unsupported(self, text: str) -> Unsupported:
        return Unsupported(f"{self.where}: {text}")

    def invalid(self, text: str) -> InvalidInput:
        return InvalidInput(f"{self.where}: {text}")

    # -- naming ----------------------------------------------------------------------
    def base(self, suffix: str = "") -> str:
        """A readable tensor name base for the current layer."""
        name = self.layer.name if self.layer is not None and self.layer.name else "t"
        return name + suffix

    def default_base(self) -> str:
        return self.base()

    def const_base(self) -> str:
        return self.base("_const")

    def const_owner(self, v: Val):
        # Folded constants are keyed by their array: ports holding the same array share
        # one TOSA constant per layout.
        return v.data

    def renamed(self, old: str, new: str) -> None:
        for mapping in (self.given, self.given_by, self.weight_given, self.boundary,
                        self.output_info, self.code_inputs):
            if old in mapping:
                mapping[new] = mapping.pop(old)

    def result(self, op: str, inputs, shape, perm, attrs=None, dtype: str = "fp32") -> Val:
        """Emit ``op`` producing the OpenVINO tensor ``shape`` held in layout ``perm``."""
        tshape = [shape[p] for p in perm]
        name = self.emit(op, inputs, tshape, dtype, attrs)
        return Val(tuple(shape), dtype, name, tuple(perm))

    # -- values ---------------------------------------------------------------------
    def reshaped(self, v: Val, shape, base: str | None = None) -> Val:
        """``v`` reshaped (row-major, OpenVINO order) to ``shape``."""
        shape = tuple(int(d) for d in shape)
        if v.is_const:
            q = v.quant.apply(lambda a: a.reshape(shape)) if v.quant is not None else None
            return Val(shape, v.dtype, data=np.asarray(v.data).reshape(shape), quant=q)
        if shape == tuple(v.shape):
            return v
        src = self.physical(v)
        base = base or self.base("_reshape")
        out = self.emit("RESHAPE", [src, self.shape_const(shape, base + "_shape")], shape,
                        v.dtype, base=base)
        return Val(shape, v.dtype, out, identity(len(shape)), codes=v.codes)

    def input_val(self, layer: Layer, index: int) -> Val:
        src, out_index = self.ir.producer(layer, index)
        try:
            v = self.vals[(src.id, out_index)]
        except KeyError:
            raise InvalidInput(f"{layer.where}: input {index} comes from {src.describe()}, "
                               f"which was not converted") from None
        declared = layer.inputs[index].dims
        if tuple(declared) != tuple(v.shape):
            if any(d < 0 for d in declared):
                raise Unsupported(f"{layer.where}: dynamic dimensions {list(declared)} on "
                                  f"input port {layer.inputs[index].id} (only static shapes)")
            raise InvalidInput(f"{layer.where}: input port {layer.inputs[index].id} declares "
                               f"{list(declared)} but {src.describe()} produces "
                               f"{list(v.shape)}")
        return v

    def const_data(self, v: Val, what: str) -> np.ndarray:
        if not v.is_const:
            raise self.unsupported(f"{what} must be constant")
        return np.asarray(v.data)

    def out_dims(self, index: int = 0) -> tuple[int, ...]:
        """Declared dims of output port ``index`` of the current layer."""
        ports = self.layer.outputs
        if index >= len(ports):
            raise self.invalid(f"has no output port number {index}")
        dims = ports[index].dims
        if any(d < 0 for d in dims):
            raise self.unsupported(f"dynamic output dimensions {list(dims)} (only static "
                                   f"shapes)")
        # Declared, so untrusted: within the TOSA level and the memory budget (int64 elements)
        # before any handler sizes something by it.
        try:
            check_elements(dims, 8, f"output port {ports[index].id}")
        except ValueError as e:
            raise self.invalid(str(e)) from None
        return tuple(dims)

    def check_shape(self, computed, index: int = 0) -> tuple[int, ...]:
        """``computed`` if it equals the declared output dims, else InvalidInput."""
        declared = self.out_dims(index)
        computed = tuple(int(d) for d in computed)
        if declared != computed:
            raise self.invalid(f"output port {self.layer.outputs[index].id} declares "
                               f"{list(declared)}, the operation gives {list(computed)}")
        return computed

    def set_given(self, name: str, qp: QParams) -> None:
        """Record FakeQuantize parameters for tensor ``name`` (one set per tensor)."""
        old = self.given.get(name)
        if old is not None and (not np.isclose(old.scalar_scale, qp.scalar_scale, rtol=1e-6)
                                or old.zp != qp.zp):
            raise self.unsupported(f"tensor '{name}' is already quantized differently by "
                                   f"{self.given_by[name]} (scale {old.scalar_scale:.6g} zp "
                                   f"{old.zp} vs scale {qp.scalar_scale:.6g} zp {qp.zp})")
        self.given[name] = qp
        self.given_by.setdefault(name, self.layer.describe())

    # -- driver -----------------------------------------------------------------------
    def run(self, handlers: dict, folders: dict) -> Graph:
        """Convert every layer with ``handlers`` (compiler/frontends/openvino/ops.py ``HANDLERS``),
        folding constant inputs with ``folders`` (openvino/fold.py ``FOLDERS``): passed in by the
        loader, since both import this module."""
        for layer in self.ir.layers:
            self.layer = layer
            handler = handlers.get(layer.type)
            ins = [self.input_val(layer, i) for i in range(len(layer.inputs))]
            if layer.type not in CODES_PASS and any(v.codes for v in ins):
                raise self.unsupported("integer codes used without a dequantizing "
                                       "FakeQuantize")
            folder = folders.get(layer.type)
            try:
                if folder is not None and ins and all(v.is_const for v in ins):
                    outs = folder(self, layer, ins)
                elif handler is not None:
                    outs = handler(self, layer, ins)
                elif folder is not None:
                    raise self.unsupported(f"{layer.type} of a computed (non-constant) tensor "
                                           f"is not supported")
                else:
                    raise self.unsupported(f"layer type '{layer.type}' (opset "
                                           f"'{layer.version}') has no TOSA mapping in this "
                                           f"frontend")
            except NpuError:
                raise
            except (ValueError, IndexError, ZeroDivisionError, OverflowError,
                    FloatingPointError) as e:
                raise self.invalid(f"cannot convert: {e}") from None
            if len(outs) > len(layer.outputs) and layer.type != "Result":
                raise self.invalid(f"has {len(layer.outputs)} output ports, the operation "
                                   f"produces {len(outs)}")
            for i, v in enumerate(outs):
                if i < len(layer.outputs):
                    self.check_shape(v.shape, i)
                self.vals[(layer.id, i)] = v
        self.layer = None
        self._finish_outputs()
        openvino_post.finish(self)
        return Graph.single_block(self.block, version=(1, 0, 0, False), profiles=["PRO-FP"],
                                  source=self.ir.path)

    def boundary_perm(self, rank: int) -> tuple[int, ...]:
        return NHWC if rank == 4 and self.layout == "nhwc" else identity(rank)

    def input_perm(self, layer: Layer, rank: int) -> tuple[int, ...]:
        """Layout of a graph input: the IR's own order (``layout="ir"``/``"nchw"``), or NHWC
        for every rank-4 input when the caller says the model's rank-4 inputs are NCHW
        (``layout="nhwc"``).  Never guessed from the graph: a converter's Transposes stay in
        the graph and cancel in the layout bookkeeping (or the compiler folds them)."""
        return self.boundary_perm(rank)

    def output_perm(self, v: Val) -> tuple[int, ...]:
        """Layout of a graph output: as held if that is NHWC or OpenVINO's order (no
        transpose needed), else the boundary layout."""
        if v.is_const:
            return self.boundary_perm(v.rank)
        if self.layout == "nhwc" and v.perm in (NHWC, identity(v.rank)):
            return v.perm
        return self.boundary_perm(v.rank)

    def _finish_outputs(self) -> None:
        block = self.block
        # Result layers in file order (their order in the model), not execution order.
        results = [layer for layer in self.ir.by_id.values() if layer.type == "Result"]
        if not results:
            raise InvalidInput(f"{self.ir.path}: the IR has no Result layer")
        taken: set[str] = set()
        for layer in results:
            self.layer = layer
            v = self.vals[(layer.id, 0)]
            src_layer, idx = self.ir.producer(layer, 0)
            port = src_layer.outputs[idx]
            wanted = (port.names.split(",")[0].strip() if port.names else "") or \
                (src_layer.name if len(src_layer.outputs) == 1 else
                 f"{src_layer.name}:{idx}") or f"output{len(taken)}"
            if wanted in block.inputs or wanted in taken:
                # Output names are unique and never a graph input's.
                wanted = self.fresh(wanted + "_out")
            perm = self.output_perm(v)
            src = self.physical(v, perm)
            if src in block.inputs or src in taken or block.tensors[src].is_const:
                shape = block.tensors[src].shape
                src = self.emit("IDENTITY", [src], shape, block.tensors[src].dtype,
                                base=wanted)
            if src != wanted:
                self.rename(src, wanted)
                src = wanted
            taken.add(src)
            block.outputs.append(src)
            self.output_info[src] = (layer.name, port.names)
            self.boundary[src] = tuple(perm)
        self.layer = None
