"""Float TOSA graph + quantization parameters -> integer TOSA 1.0 graph.

Every float activation tensor that survives becomes an int8 tensor of the same name with
parameters from :class:`QParams` (given, e.g. by graph.quant, or from calibration ranges).
Lowerings (TOSA 1.0 forms: zero points, multipliers and shifts are constant input tensors):

* CONV2D / DEPTHWISE_CONV2D / TRANSPOSE_CONV2D: int8 x int8 (per-channel symmetric
  weights) -> int32 with an int32 bias (``scale = input_scale * weight_scale``), then a
  per-channel RESCALE (scale32) to int8; a CLAMP that follows (ReLU, ReLU6) becomes an int8
  CLAMP after the RESCALE.
* MATMUL of two activations: int8 MATMUL with both zero points, RESCALE per tensor.
* MAX_POOL2D, RESHAPE, TRANSPOSE, SLICE, IDENTITY: int8 in and out, same parameters.
  PAD pads with the zero point (or the quantized pad value).  AVG_POOL2D keeps the
  parameters, passing the zero point as input and output zero point.
* CLAMP alone: int8 CLAMP with quantized bounds.
* ADD/SUB: both operands rescaled to int32 in a common scale with 20 bits of headroom (as
  TFLite does), int32 ADD/SUB, RESCALE to the output parameters.
* CONCAT: inputs whose parameters differ from the output's are rescaled first.
* MUL: both operands to int32 without their zero points (RESCALE by 1), int32 MUL (shift
  0: |product| <= 255 * 255), RESCALE by ``a_scale * b_scale / out_scale``.
* TANH, SIGMOID: an int8 TABLE of the function at every input code, rounded half away from
  zero to the output parameters (what OpenVINO's FakeQuantize around the float function and
  TFLite's int8 LUT kernels compute).
* A softmax group whose result has TFLite's softmax parameters: TFLite's int8 softmax
  (``softmax``: the emitter a frontend passes; compiler/graph/quantize/softmax.py).
* 16x8 (given int16 parameters, zero point 0, e.g. OpenVINO's levels=65536 FakeQuantize):
  convolutions take int16 activations and int8 weights into an int48 accumulator with an
  int48 bias, then RESCALE with a 16-bit multiplier (TOSA has no scale32 from int48) to
  int16; CLAMP and layout operators pass int16 through; any other operator on int16 is
  refused.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from compiler.graph.quantize.prepare import CONVS
from compiler.graph.quantize.softmax import SOFTMAX_SCALE, SOFTMAX_ZERO_POINT
from compiler.graph.quantize.qparams import (
    INT8_MAX, INT8_MIN, QParams, activation_qparams, quantize_multiplier,
    round_half_away, symmetric_weight_qparams,
)
from tosa_ir import INT_RANGES, Block, Graph, Operator, Tensor, numpy_dtype
from tosa_ir.errors import Unsupported

PASS_THROUGH = ("MAX_POOL2D", "RESHAPE", "TRANSPOSE", "SLICE", "IDENTITY")
ADD_SHIFT = 20          # headroom bits for ADD/SUB operands (TFLite's left_shift)


@dataclass
class QuantizedModel:
    """An integer graph and how its integers relate to the float model.

    Attributes
    ----------
    graph
        The int8 TOSA 1.0 graph.
    qparams
        Parameters of every int8 tensor that stands for a float tensor of the same name.
    inputs, outputs
        Names of the graph inputs and outputs (their parameters are in ``qparams``).
    notes
        What the quantizer decided (folds, the float tail it removed, ...).
    removed_tail
        Float operators removed after the logits (softmax).
    float_graph
        The float graph after preparation (folds, tail cut): same tensor names as the
        integer graph, for comparisons.
    """

    graph: Graph
    qparams: dict[str, QParams]
    inputs: list[str]
    outputs: list[str]
    notes: list[str] = field(default_factory=list)
    removed_tail: list[str] = field(default_factory=list)
    float_graph: Graph | None = None   # the prepared float graph the int graph mirrors

    def quantize_inputs(self, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Float graph inputs -> the int8 arrays the integer graph takes."""
        return {n: self.qparams[n].quantize(values[n]).astype(np.int8) for n in self.inputs}

    def dequantize(self, name: str, codes: np.ndarray) -> np.ndarray:
        return self.qparams[name].dequantize(codes)


# Operators whose lowering takes int16 activations as well as int8 (16x8 models).
_INT16_OPS = frozenset(CONVS + ("CLAMP", "RESHAPE", "TRANSPOSE", "IDENTITY", "SLICE",
                                "MAX_POOL2D"))


def _multiplier16(mult, shift, where: str):
    """apply_scale_32's (multiplier, shift) as apply_scale_16's: the 31-bit multiplier
    rounded to 15 bits, the shift 16 less (TOSA RESCALE from int48)."""
    m = np.floor(np.asarray(mult, np.int64) / (1 << 16) + 0.5).astype(np.int64)
    sh = np.asarray(shift, np.int64) - 16
    carry = m >= (1 << 15)
    m[carry] >>= 1
    sh[carry] -= 1
    if np.any(sh < 2):
        raise Unsupported(f"quantizer: {where}: rescale factor too large for a 16-bit "
                          f"multiplier")
    return m, sh


class _Lowering:
    def __init__(self, graph: Graph, params, rounding_mode: str, softmax=None):
        self.src = graph.main
        # Softmax groups lowered whole (compiler/graph/quantize/softmax.py): by the id of
        # their first operator, and the emitter that writes TFLite's int8 softmax.
        groups, self.softmax_layer = softmax or ([], None)
        self.softmax_at = {id(g.ops[0]): g for g in groups}
        self.params = params              # callable: float tensor name -> QParams
        self.rounding = rounding_mode
        self.block = Block(self.src.name)
        self.names = set(self.src.tensors)
        self.q: dict[str, QParams] = {}
        self.consumers = self.src.consumers()
        self.producers = self.src.producers()
        self.fused: set[int] = set()
        self._consts: dict[tuple, str] = {}

    # -- helpers ------------------------------------------------------------------
    def fresh(self, base: str) -> str:
        name, i = base, 1
        while name in self.names or name in self.block.tensors:
            name = f"{base}_{i}"
            i += 1
        self.names.add(name)
        return name

    def const(self, data, dtype: str, base: str, shape=None) -> str:
        arr = np.asarray(data)
        shape = tuple(arr.shape if shape is None else shape)
        name = self.fresh(base)
        self.block.add_tensor(Tensor(name, shape, dtype,
                                     arr.reshape(shape).astype(numpy_dtype(dtype))))
        return name

    def scalar(self, value: int, dtype: str) -> str:
        """Shared rank-1 single-value constant (zero points)."""
        key = (dtype, int(value))
        if key not in self._consts:
            tag = f"m{-value}" if value < 0 else str(value)
            self._consts[key] = self.const([value], dtype, f"zp_{dtype}_{tag}", (1,))
        return self._consts[key]

    def tensor(self, name: str, shape, dtype: str) -> str:
        self.block.add_tensor(Tensor(name, tuple(shape), dtype))
        self.names.add(name)
        return name

    def emit(self, op: str, inputs, out: str, shape, dtype: str, attrs=None, loc="") -> str:
        if out not in self.block.tensors:
            self.tensor(out, shape, dtype)
        self.block.operators.append(Operator(op, list(inputs), [out], dict(attrs or {}), loc))
        return out

    def shape_of(self, name: str):
        return self.src.tensors[name].shape

    def qp(self, name: str) -> QParams:
        if name not in self.q:
            raise Unsupported(f"quantizer: tensor {name!r} has no integer value")
        return self.q[name]

    def copy_const(self, name: str) -> str:
        t = self.src.tensors[name]
        if name not in self.block.tensors:
            self.block.add_tensor(Tensor(t.name, t.shape, t.dtype, t.data))
        return name

    def fused_clamp(self, out: str):
        """A CLAMP consuming ``out`` that can fold into the preceding RESCALE."""
        users = self.consumers.get(out, [])
        if len(users) == 1 and users[0].op == "CLAMP" and out not in self.src.outputs:
            return users[0]
        return None

    def rescale(self, x: str, out: str, shape, scale, in_zp: int, out_zp: int, in_dtype: str,
                loc: str, out_dtype: str = "int8") -> str:
        scale = np.atleast_1d(np.asarray(scale, np.float64))
        try:
            mult, shift = quantize_multiplier(scale)
        except ValueError as err:
            raise Unsupported(f"quantizer: {loc or out}: {err}") from None
        # An int48 accumulator (16-bit activations) takes a 16-bit multiplier (TOSA: no
        # scale32 from int48), as TFLite's 16x8 kernels do.
        scale32 = in_dtype != "int48"
        if not scale32:
            mult, shift = _multiplier16(mult, shift, loc or out)
        per_channel = scale.size > 1
        attrs = {"scale32": scale32, "rounding_mode": self.rounding, "per_channel": per_channel,
                 "input_unsigned": False, "output_unsigned": False}
        inputs = [x, self.const(mult, "int32" if scale32 else "int16", out + "_multiplier"),
                  self.const(shift, "int8", out + "_shift"),
                  self.scalar(in_zp, in_dtype), self.scalar(out_zp, out_dtype)]
        return self.emit("RESCALE", inputs, out, shape, out_dtype, attrs, loc)

    def requantize_output(self, acc: str, out: str, final: str, shape, scale: float, oq: QParams,
                          clamp: Operator | None, loc: str) -> None:
        """The int32 (int48) accumulator ``acc`` of ``out`` -> ``final`` with parameters
        ``oq`` (int8, int16): a RESCALE by ``scale``, then the fused ``clamp`` (whose output
        is ``final``) if any."""
        y = self.rescale(acc, out if clamp is not None else final, shape, scale, 0, oq.zp,
                         self.block.tensors[acc].dtype, loc, oq.dtype)
        if clamp is not None:
            self.fused.add(id(clamp))
            self.clamp_int(y, final, shape, oq, clamp.attrs["min_val"], clamp.attrs["max_val"],
                           clamp.location)
        self.q[final] = oq

    def clamp_int(self, x: str, out: str, shape, qp: QParams, lo: float, hi: float, loc: str):
        tmin, tmax = INT_RANGES[qp.dtype]
        qlo = int(np.clip(round_half_away(lo / qp.scalar_scale) + qp.zp, tmin, tmax)) \
            if np.isfinite(lo) and abs(lo) < 1e30 else tmin
        qhi = int(np.clip(round_half_away(hi / qp.scalar_scale) + qp.zp, tmin, tmax)) \
            if np.isfinite(hi) and abs(hi) < 1e30 else tmax
        attrs = {"min_val": qlo, "max_val": max(qlo, qhi), "nan_mode": "PROPAGATE"}
        return self.emit("CLAMP", [x], out, shape, qp.dtype, attrs, loc)

    def output_params(self, name: str) -> QParams:
        qp = self.params(name)
        if qp.per_channel:
            raise Unsupported(f"quantizer: per-channel parameters for activation {name!r}")
        return qp

    # -- driver -------------------------------------------------------------------
    def run(self) -> Block:
        for name in self.src.inputs:
            t = self.src.tensors[name]
            if t.dtype != "fp32":
                raise Unsupported(f"quantizer: graph input {name!r} is {t.dtype}, not fp32")
            self.q[name] = self.output_params(name)
            self.tensor(name, t.shape, self.q[name].dtype)
            self.block.inputs.append(name)
        for op in self.src.operators:
            if id(op) in self.fused:
                continue
            if id(op) in self.softmax_at:
                self.softmax_group(self.softmax_at[id(op)])
                continue
            handler = getattr(self, "op_" + op.op.lower(), None)
            if handler is None:
                raise Unsupported(f"quantizer: {op.op} ({op.location or op.outputs[0]}) has no "
                                  f"integer lowering")
            if op.op not in _INT16_OPS and any(
                    n in self.q and self.q[n].dtype != "int8" for n in op.inputs):
                raise Unsupported(f"quantizer: {op.op} ({op.location or op.outputs[0]}) on "
                                  f"16-bit activations (only convolutions, CLAMP and layout "
                                  f"operators take them)")
            handler(op)
        for name in self.src.outputs:
            self.qp(name)
            self.block.outputs.append(name)
        return self.block

    # -- operators ----------------------------------------------------------------
    def _conv_weights(self, op: Operator):
        wt = self.src.tensors[op.inputs[1]]
        w = np.asarray(wt.data, np.float64)
        bias = np.asarray(self.src.tensors[op.inputs[2]].data, np.float64)
        if not (np.all(np.isfinite(w)) and np.all(np.isfinite(bias))):
            raise Unsupported(f"quantizer: {op.location or op.outputs[0]}: weights or bias "
                              f"contain NaN or infinity")
        if op.op == "DEPTHWISE_CONV2D":
            kh, kw, c, m = w.shape
            per_oc = w.reshape(kh * kw, c * m)            # output channel c*M + m
            oc = c * m
        else:
            oc = w.shape[0]
            per_oc = w.reshape(oc, -1).T
        given = self.params.weight(op.inputs[1], oc)
        wq = given if given is not None else symmetric_weight_qparams(np.abs(per_oc).max(axis=0))
        scale = np.broadcast_to(wq.scale, (oc,))
        zp = wq.zp
        if op.op == "DEPTHWISE_CONV2D":
            codes = round_half_away(w / scale.reshape(1, 1, c, m)) + zp
        else:
            codes = round_half_away(w / scale.reshape((-1,) + (1,) * (w.ndim - 1))) + zp
        lo = -INT8_MAX if zp == 0 else INT8_MIN            # symmetric weights: [-127, 127]
        return np.clip(codes, lo, INT8_MAX).astype(np.int8), scale, zp, oc

    def op_conv2d(self, op: Operator) -> None:
        x, out = op.inputs[0], op.outputs[0]
        xq = self.qp(x)
        codes, wscale, wzp, oc = self._conv_weights(op)
        clamp = self.fused_clamp(out)
        final = clamp.outputs[0] if clamp is not None else out
        oq = self.output_params(final)
        bias = np.broadcast_to(np.asarray(self.src.tensors[op.inputs[2]].data, np.float64)
                               .reshape(-1), (oc,))
        acc_scale = xq.scalar_scale * wscale
        # 16x8 (int16 activations, int8 weights): int48 accumulator and bias, as TOSA's
        # integer profile has it (and TFLite's 16x8 kernels, with their int64 bias).
        acc_t = {"int8": "int32", "int16": "int48"}.get(xq.dtype)
        if acc_t is None or oq.dtype != xq.dtype:
            raise Unsupported(f"quantizer: {op.location or out}: {xq.dtype} input with "
                              f"{oq.dtype} output (only int8 -> int8 and int16 -> int16)")
        lo, hi = INT_RANGES[acc_t]
        bias_q = np.clip(round_half_away(bias / acc_scale), lo, hi)
        shape = self.shape_of(out)
        inputs = [x, self.const(codes, "int8", f"{out}_weight_q"),
                  self.const(bias_q, acc_t, f"{out}_bias_q", (oc,)),
                  self.scalar(xq.zp, xq.dtype), self.scalar(wzp, "int8")]
        attrs = dict(op.attrs)
        attrs["acc_type"] = acc_t.upper()
        acc = self.emit(op.op, inputs, self.fresh(f"{out}_acc"), shape, acc_t, attrs,
                        op.location)
        self.requantize_output(acc, out, final, shape, acc_scale / oq.scalar_scale, oq, clamp, op.location)

    op_depthwise_conv2d = op_conv2d
    op_transpose_conv2d = op_conv2d

    def op_matmul(self, op: Operator) -> None:
        a, b, out = op.inputs[0], op.inputs[1], op.outputs[0]
        inputs, scales = [], []
        for name in (a, b):
            t = self.src.tensors[name]
            if t.is_const:
                data = np.asarray(t.data, np.float64)
                q = symmetric_weight_qparams(np.abs(data).max())
                inputs.append(self.const(np.clip(q.quantize(data), -INT8_MAX, INT8_MAX),
                                         "int8", f"{name}_q"))
                scales.append(q)
            else:
                inputs.append(name)
                scales.append(self.qp(name))
        clamp = self.fused_clamp(out)
        final = clamp.outputs[0] if clamp is not None else out
        oq = self.output_params(final)
        shape = self.shape_of(out)
        inputs += [self.scalar(scales[0].zp, "int8"), self.scalar(scales[1].zp, "int8")]
        acc = self.emit("MATMUL", inputs, self.fresh(f"{out}_acc"), shape, "int32", {},
                        op.location)
        real = scales[0].scalar_scale * scales[1].scalar_scale / oq.scalar_scale
        self.requantize_output(acc, out, final, shape, real, oq, clamp, op.location)

    def _pass_through(self, op: Operator, extra_inputs) -> None:
        x, out = op.inputs[0], op.outputs[0]
        self.q[out] = self.qp(x)
        self.emit(op.op, [x] + list(extra_inputs), out, self.shape_of(out), self.q[out].dtype,
                  op.attrs, op.location)

    def op_max_pool2d(self, op):
        self._pass_through(op, [])

    def op_identity(self, op):
        self._pass_through(op, [])

    def op_transpose(self, op):
        self._pass_through(op, [])

    def op_reshape(self, op):
        self._pass_through(op, [self.copy_const(n) for n in op.inputs[1:]])

    def op_slice(self, op):
        self._pass_through(op, [self.copy_const(n) for n in op.inputs[1:]])

    def op_pad(self, op):
        xq = self.qp(op.inputs[0])
        value = float(np.asarray(self.src.tensors[op.inputs[2]].data).reshape(-1)[0])
        pad_const = self.const([int(xq.quantize(np.asarray([value]))[0])], "int8",
                               f"{op.outputs[0]}_padval", (1,))
        self._pass_through(op, [self.copy_const(op.inputs[1]), pad_const])

    def op_avg_pool2d(self, op):
        zp = self.scalar(self.qp(op.inputs[0]).zp, "int8")
        attrs = dict(op.attrs)
        attrs["acc_type"] = "INT32"
        self.q[op.outputs[0]] = self.qp(op.inputs[0])
        self.emit(op.op, [op.inputs[0], zp, zp], op.outputs[0], self.shape_of(op.outputs[0]),
                  "int8", attrs, op.location)

    def op_clamp(self, op):
        xq = self.qp(op.inputs[0])
        self.q[op.outputs[0]] = xq
        self.clamp_int(op.inputs[0], op.outputs[0], self.shape_of(op.outputs[0]), xq,
                       op.attrs["min_val"], op.attrs["max_val"], op.location)

    def _operand(self, name: str) -> tuple[str, QParams]:
        t = self.src.tensors[name]
        if not t.is_const:
            return name, self.qp(name)
        data = np.asarray(t.data, np.float64)
        q = activation_qparams(data.min(), data.max())
        return self.const(q.quantize(data), "int8", f"{name}_q", t.shape), q

    def op_add(self, op):
        out = op.outputs[0]
        (a, aq), (b, bq) = self._operand(op.inputs[0]), self._operand(op.inputs[1])
        clamp = self.fused_clamp(out)
        final = clamp.outputs[0] if clamp is not None else out
        oq = self.output_params(final)
        twice_max = 2.0 * max(aq.scalar_scale, bq.scalar_scale)
        shifted = []
        for name, q, tag in ((a, aq, "a"), (b, bq, "b")):
            shape = self.block.tensors[name].shape if name in self.block.tensors else \
                self.shape_of(name)
            shifted.append(self.rescale(name, self.fresh(f"{out}_{tag}32"), shape,
                                        q.scalar_scale / twice_max * (1 << ADD_SHIFT), q.zp, 0,
                                        "int8", op.location, "int32"))
        shape = self.shape_of(out)
        acc = self.emit(op.op, shifted, self.fresh(f"{out}_acc"), shape, "int32", {},
                        op.location)
        self.requantize_output(acc, out, final, shape, twice_max / ((1 << ADD_SHIFT) * oq.scalar_scale), oq,
                               clamp, op.location)

    op_sub = op_add

    def op_mul(self, op):
        out = op.outputs[0]
        (a, aq), (b, bq) = self._operand(op.inputs[0]), self._operand(op.inputs[1])
        clamp = self.fused_clamp(out)
        final = clamp.outputs[0] if clamp is not None else out
        oq = self.output_params(final)
        wide = []
        for name, q, tag in ((a, aq, "a"), (b, bq, "b")):
            shape = self.block.tensors[name].shape if name in self.block.tensors else self.shape_of(name)
            wide.append(self.rescale(name, self.fresh(f"{out}_{tag}32"), shape, 1.0, q.zp, 0, "int8",
                                     op.location, "int32"))
        shape = self.shape_of(out)
        acc = self.emit("MUL", wide + [self.scalar(0, "int8")], self.fresh(f"{out}_acc"), shape, "int32", {},
                        op.location)
        self.requantize_output(acc, out, final, shape, aq.scalar_scale * bq.scalar_scale / oq.scalar_scale,
                               oq, clamp, op.location)

    def softmax_group(self, group) -> None:
        """TFLite's int8 softmax of the group's logits, named as the group's result, on
        TFLite's softmax grid (which the group's result is given: softmax_groups)."""
        xq = self.qp(group.logits)
        if xq.per_channel or xq.dtype != "int8":
            raise Unsupported(f"quantizer: softmax of {group.logits!r}: int8 per-tensor "
                              f"logits only ({xq.describe()})")
        self.fused.update(id(o) for o in group.ops)
        out = self.softmax_layer(self.block, group.logits, xq.scalar_scale, group.output,
                                 self.names)
        if out != group.output:
            raise Unsupported(f"quantizer: softmax result {group.output!r} became {out!r}")
        self.names.update(self.block.tensors)
        self.q[out] = QParams(SOFTMAX_SCALE, SOFTMAX_ZERO_POINT)

    def _table(self, op, func) -> None:
        x, out = op.inputs[0], op.outputs[0]
        xq, oq = self.qp(x), self.output_params(out)
        codes = np.arange(INT8_MIN, INT8_MAX + 1, dtype=np.float64)
        y = func((codes - xq.zp) * xq.scalar_scale)
        table = np.clip(round_half_away(y / oq.scalar_scale) + oq.zp, INT8_MIN, INT8_MAX)
        tab = self.const(table.astype(np.int8), "int8", f"{out}_table", (256,))
        self.q[out] = oq
        self.emit("TABLE", [x, tab], out, self.shape_of(out), "int8", {}, op.location)

    def op_tanh(self, op):
        self._table(op, np.tanh)

    def op_sigmoid(self, op):
        self._table(op, lambda v: 1.0 / (1.0 + np.exp(-v)))

    def op_concat(self, op):
        out = op.outputs[0]
        oq = self.output_params(out)
        inputs = []
        for name in op.inputs:
            name, q = self._operand(name)
            if q.scalar_scale != oq.scalar_scale or q.zp != oq.zp:
                shape = self.block.tensors[name].shape
                name = self.rescale(name, self.fresh(f"{name}_to_{out}"), shape,
                                    q.scalar_scale / oq.scalar_scale, q.zp, oq.zp, "int8",
                                    op.location)
            inputs.append(name)
        self.q[out] = oq
        self.emit("CONCAT", inputs, out, self.shape_of(out), "int8", op.attrs, op.location)


class ParamSource:
    """Where activation and weight parameters come from: given ones first, then ranges.

    A tensor without either takes the parameters of the tensor it flows into through
    layout operators and CLAMP (graph.quant names the NNEF tensors, some of which are
    reached through a RESHAPE).
    """

    def __init__(self, block: Block, given: dict[str, QParams] | None,
                 ranges: dict[str, tuple[float, float]] | None):
        self.block = block
        self.given = dict(given or {})
        self.ranges = ranges or {}
        self.consumers = block.consumers()

    def _chain(self, name: str) -> list[str]:
        """``name`` and the tensors it flows into through single-use layout ops / CLAMP."""
        chain = [name]
        while True:
            users = self.consumers.get(chain[-1], [])
            if len(users) != 1 or users[0].op not in PASS_THROUGH + ("CLAMP",) or \
                    users[0].outputs[0] in chain:
                return chain
            chain.append(users[0].outputs[0])

    def __call__(self, name: str) -> QParams:
        chain = self._chain(name)
        for cur in chain:
            if cur in self.given:
                return self.given[cur]
        for cur in chain:
            if cur in self.ranges:
                lo, hi = self.ranges[cur]
                try:
                    return activation_qparams(lo, hi)
                except ValueError as err:
                    raise Unsupported(f"quantizer: tensor {cur!r}: calibrated {err}") \
                        from None
        raise Unsupported(f"quantizer: no quantization parameters for tensor {name!r} "
                          f"(neither given nor calibrated)")

    def weight(self, name: str, out_channels: int) -> QParams | None:
        qp = self.given.get(name)
        if qp is None:
            return None
        if qp.scale.size not in (1, out_channels):
            raise Unsupported(f"quantizer: {qp.scale.size} weight scales for {out_channels} "
                              f"output channels of {name!r}")
        return qp


def lower(graph: Graph, params: ParamSource, rounding_mode: str = "DOUBLE_ROUND",
          softmax=None) -> tuple[Graph, dict[str, QParams]]:
    """The integer graph for a prepared float graph (see module docstring), and the
    parameters of its int8 tensors that stand for float tensors.  ``softmax``: None, or
    (softmax groups, emitter) to lower those groups whole (compiler/graph/quantize/softmax.py)."""
    if rounding_mode not in ("SINGLE_ROUND", "DOUBLE_ROUND"):
        raise ValueError(f"rounding_mode must be SINGLE_ROUND or DOUBLE_ROUND, not "
                         f"{rounding_mode!r}")
    low = _Lowering(graph, params, rounding_mode, softmax)
    block = low.run()
    out = Graph.single_block(block, version=(1, 0, 0, False), profiles=["PRO-INT"],
                             source=graph.source)
    return out, low.q


__all__ = ["QuantizedModel", "ParamSource", "lower", "CONVS"]
