"""A minimal OpenVINO IR writer for tests: hand-built .xml/.bin, including broken ones.

It writes the IR v11 form ``openvino.save_model`` writes (layers with ``<data>``,
``<input>``/``<output>`` ports with ``<dim>``s, ``<edges>``), without needing openvino::

    b = IrBuilder()
    x = b.parameter("x", [1, 2, 4, 4])
    w = b.const(np.ones((3, 2, 1, 1), np.float32))
    y = b.layer("Convolution", [x, w], [[1, 3, 4, 4]], strides="1,1", dilations="1,1",
                pads_begin="0,0", pads_end="0,0", auto_pad="explicit")[0]
    b.result(y)
    xml_path = b.write(tmp_path, "model")
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import quoteattr

import numpy as np

ET_OF = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16", np.dtype(np.int8): "i8",
         np.dtype(np.uint8): "u8", np.dtype(np.int32): "i32", np.dtype(np.int64): "i64",
         np.dtype(np.bool_): "boolean", np.dtype(np.float64): "f64"}
PRECISION = {"f32": "FP32", "f16": "FP16", "i8": "I8", "u8": "U8", "i32": "I32", "i64": "I64",
             "boolean": "BOOL", "f64": "FP64", "bf16": "BF16", "u4": "U4", "i4": "I4",
             "u1": "U1"}


@dataclass
class Ref:
    """One output port: layer id, port id, shape, element type."""

    layer: int
    port: int
    shape: tuple[int, ...]
    et: str = "f32"


@dataclass
class _Layer:
    id: int
    name: str
    type: str
    version: str
    data: dict
    inputs: list[Ref]
    out_shapes: list[tuple[int, ...]]
    out_et: str
    out_names: list[str] = field(default_factory=list)


class IrBuilder:
    def __init__(self, version: int = 11):
        self.version = version
        self.layers: list[_Layer] = []
        self.bin = bytearray()
        self.extra_edges: list[tuple[int, int, int, int]] = []

    def _add(self, type_, inputs, out_shapes, data, name=None, version="opset1", et="f32",
             out_names=None) -> list[Ref]:
        lid = len(self.layers)
        layer = _Layer(lid, name or f"{type_}_{lid}", type_, version,
                       {k: str(v) for k, v in data.items()}, list(inputs),
                       [tuple(s) for s in out_shapes], et, list(out_names or []))
        self.layers.append(layer)
        first = len(inputs)
        return [Ref(lid, first + i, tuple(s), et) for i, s in enumerate(layer.out_shapes)]

    def parameter(self, name: str, shape, et: str = "f32") -> Ref:
        return self._add("Parameter", [], [shape],
                         {"shape": ",".join(map(str, shape)), "element_type": et},
                         name=name, et=et)[0]

    def raw_const(self, raw: bytes, et: str, shape, name=None, offset=None, size=None) -> Ref:
        """A Const with the given bytes (offset/size may be forced to wrong values)."""
        off = len(self.bin)
        self.bin += raw
        data = {"element_type": et, "shape": ", ".join(map(str, shape)),
                "offset": off if offset is None else offset,
                "size": len(raw) if size is None else size}
        return self._add("Const", [], [shape], data, name=name, et=et)[0]

    def const(self, values, et: str | None = None, name=None) -> Ref:
        arr = np.asarray(values)
        et = et or ET_OF[arr.dtype]
        return self.raw_const(arr.tobytes(), et, arr.shape, name=name)

    def layer(self, type_: str, inputs, out_shapes, name=None, version="opset1", et="f32",
              out_names=None, **data) -> list[Ref]:
        data = {k.replace("__", "-"): v for k, v in data.items()}
        return self._add(type_, inputs, out_shapes, data, name=name, version=version, et=et,
                         out_names=out_names)

    def one(self, type_: str, inputs, out_shape, **kw) -> Ref:
        return self.layer(type_, inputs, [out_shape], **kw)[0]

    def result(self, ref: Ref, name=None) -> None:
        self._add("Result", [ref], [], {}, name=name)

    # -- output ---------------------------------------------------------------------
    @staticmethod
    def _port(pid: int, shape, et: str | None, names: str = "") -> str:
        attrs = f' id="{pid}"'
        if et:
            attrs += f' precision="{PRECISION.get(et, et.upper())}"'
        if names:
            attrs += f" names={quoteattr(names)}"
        dims = "".join(f"<dim>{d}</dim>" for d in shape)
        return f"<port{attrs}>{dims}</port>"

    def xml(self) -> str:
        lines = ['<?xml version="1.0"?>', f'<net name="test" version="{self.version}">',
                 "<layers>"]
        edges = []
        for layer in self.layers:
            lines.append(f'<layer id="{layer.id}" name={quoteattr(layer.name)} '
                         f'type="{layer.type}" version="{layer.version}">')
            if layer.data:
                attrs = " ".join(f"{k}={quoteattr(v)}" for k, v in layer.data.items())
                lines.append(f"<data {attrs}/>")
            if layer.inputs:
                lines.append("<input>")
                for i, ref in enumerate(layer.inputs):
                    lines.append(self._port(i, ref.shape, ref.et))
                    edges.append((ref.layer, ref.port, layer.id, i))
                lines.append("</input>")
            if layer.out_shapes:
                lines.append("<output>")
                first = len(layer.inputs)
                for i, shape in enumerate(layer.out_shapes):
                    names = layer.out_names[i] if i < len(layer.out_names) else ""
                    lines.append(self._port(first + i, shape, layer.out_et, names))
                lines.append("</output>")
            lines.append("</layer>")
        lines.append("</layers>")
        lines.append("<edges>")
        for fl, fp, tl, tp in edges + self.extra_edges:
            lines.append(f'<edge from-layer="{fl}" from-port="{fp}" to-layer="{tl}" '
                         f'to-port="{tp}"/>')
        lines.append("</edges>")
        lines.append("</net>")
        return "\n".join(lines) + "\n"

    def write(self, folder, name: str = "model", xml: str | None = None,
              bin_bytes: bytes | None = None) -> Path:
        folder = Path(folder)
        path = folder / f"{name}.xml"
        path.write_text(self.xml() if xml is None else xml)
        (folder / f"{name}.bin").write_bytes(bytes(self.bin if bin_bytes is None
                                                   else bin_bytes))
        return path


def conv_attrs(stride=1, pad=0, dilation=1, auto_pad="explicit") -> dict:
    return {"strides": f"{stride},{stride}", "dilations": f"{dilation},{dilation}",
            "pads_begin": f"{pad},{pad}", "pads_end": f"{pad},{pad}", "auto_pad": auto_pad}
