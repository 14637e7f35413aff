"""Safe reading of an OpenVINO IR ``.xml`` file (IR v10/v11) into plain data.

The XML is parsed with :mod:`defusedxml` with document type declarations forbidden: an
OpenVINO IR never needs a DTD, so a file with one (entity expansion bombs such as "billion
laughs", external entities, external DTDs) is rejected before anything is expanded or
fetched.  The result is a :class:`IrModel`: layers with their attributes and ports, and the
edges between ports, checked for consistency (unique ids, edges between existing ports, one
producer per input port, no cycles) and put in execution order.

Every problem is :class:`~tosa_ir.errors.InvalidInput` (malformed) or
:class:`~tosa_ir.errors.Unsupported` (IR versions other than 10/11) naming the file and,
where there is one, the layer (id, name, type).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree.ElementTree import Element, ParseError

import defusedxml
import defusedxml.ElementTree as SafeET

from tosa_ir.errors import InvalidInput, Unsupported

SUPPORTED_IR_VERSIONS = (10, 11)
# A guard against absurd inputs; real IR .xml files of large networks are a few MB.
MAX_XML_BYTES = 256 << 20


@dataclass
class Port:
    """One input or output port of a layer: its id, dimensions and precision."""

    id: int
    dims: tuple[int, ...]
    precision: str = ""
    names: str = ""


@dataclass
class Layer:
    """One ``<layer>``: type and opset, ``<data>`` attributes (strings), ports."""

    id: int
    name: str
    type: str
    version: str
    data: dict[str, str]
    inputs: list[Port]
    outputs: list[Port]
    source: str = ""          # the .xml file, for messages

    def describe(self) -> str:
        return f"layer {self.id} '{self.name}' ({self.type})"

    @property
    def where(self) -> str:
        return f"{self.source}: {self.describe()}"

    def output_index(self, port_id: int) -> int:
        for i, p in enumerate(self.outputs):
            if p.id == port_id:
                return i
        raise KeyError(port_id)


@dataclass
class IrModel:
    """A parsed IR: layers in execution order and, per input port, its producer."""

    path: str
    name: str
    version: int
    layers: list[Layer]                                   # topological order
    by_id: dict[int, Layer]
    # (to_layer, to_port) -> (from_layer, from_port)
    source_of: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)
    # (from_layer, from_port) -> number of consumers
    fanout: dict[tuple[int, int], int] = field(default_factory=dict)

    def producer(self, layer: Layer, index: int) -> tuple[Layer, int]:
        """The layer and output *index* feeding input number ``index`` of ``layer``."""
        port = layer.inputs[index]
        try:
            src_id, src_port = self.source_of[(layer.id, port.id)]
        except KeyError:
            raise InvalidInput(f"{layer.where}: input port {port.id} is not connected") \
                from None
        src = self.by_id[src_id]
        return src, src.output_index(src_port)


def _int(text: str | None, what: str, where: str) -> int:
    try:
        return int(str(text).strip())
    except (TypeError, ValueError):
        raise InvalidInput(f"{where}: {what} must be an integer, got {text!r}") from None


def _ports(elem: Element | None, where: str) -> list[Port]:
    if elem is None:
        return []
    ports = []
    for p in elem.findall("port"):
        pid = _int(p.get("id"), "port id", where)
        dims = []
        for d in p.findall("dim"):
            text = (d.text or "").strip()
            try:
                value = int(text)
            except ValueError:
                # "?" or a range "1..8": a dynamic dimension.
                value = -1
            dims.append(value)
        ports.append(Port(pid, tuple(dims), p.get("precision", ""), p.get("names", "")))
    return ports


def _read_text(path: Path) -> bytes:
    try:
        size = os.path.getsize(path)
        if size > MAX_XML_BYTES:
            raise InvalidInput(f"{path}: {size} bytes is too large for an IR .xml file")
        return path.read_bytes()
    except OSError as e:
        raise InvalidInput(f"{path}: cannot read: {e.strerror or e}") from None


def parse_root(path: Path) -> Element:
    """The ``<net>`` element of ``path``, parsed without DTDs or entities."""
    text = _read_text(path)
    try:
        root = SafeET.fromstring(text, forbid_dtd=True, forbid_entities=True,
                                 forbid_external=True)
    except defusedxml.DTDForbidden:
        raise InvalidInput(f"{path}: XML document type declarations (DTD) are not allowed "
                           f"in an OpenVINO IR (entity expansion / external entity risk)") \
            from None
    except defusedxml.EntitiesForbidden as e:
        raise InvalidInput(f"{path}: XML entity declaration '{e.name}' is not allowed in an "
                           f"OpenVINO IR") from None
    except defusedxml.ExternalReferenceForbidden:
        raise InvalidInput(f"{path}: external XML references are not allowed in an "
                           f"OpenVINO IR") from None
    except ParseError as e:
        raise InvalidInput(f"{path}: malformed XML: {e}") from None
    except (ValueError, UnicodeError) as e:
        raise InvalidInput(f"{path}: malformed XML: {e}") from None
    if root.tag != "net":
        raise InvalidInput(f"{path}: not an OpenVINO IR (root element <{root.tag}>, "
                           f"expected <net>)")
    return root


def read_ir(path: str | os.PathLike) -> IrModel:
    """Parse and check the IR ``.xml`` at ``path``.

    Raises
    ------
    InvalidInput
        Unreadable or malformed XML, DTDs/entities, inconsistent layers, ports or edges,
        cycles.
    Unsupported
        IR versions other than 10 and 11.
    """
    path = Path(path)
    root = parse_root(path)
    src = str(path)
    version_text = root.get("version")
    if version_text is None:
        raise InvalidInput(f"{src}: <net> has no version attribute")
    version = _int(version_text, "IR version", src)
    if version not in SUPPORTED_IR_VERSIONS:
        raise Unsupported(f"{src}: IR version {version} is not supported (only "
                          f"{', '.join(map(str, SUPPORTED_IR_VERSIONS))})")
    layers_elem = root.find("layers")
    if layers_elem is None:
        raise InvalidInput(f"{src}: no <layers> section")
    layers: list[Layer] = []
    by_id: dict[int, Layer] = {}
    for elem in layers_elem.findall("layer"):
        lid = _int(elem.get("id"), "layer id", f"{src}: layer '{elem.get('name', '?')}'")
        name = elem.get("name", "")
        ltype = elem.get("type")
        where = f"{src}: layer {lid} '{name}'"
        if not ltype:
            raise InvalidInput(f"{where}: no type attribute")
        if lid in by_id:
            raise InvalidInput(f"{where}: duplicate layer id {lid} (also "
                               f"'{by_id[lid].name}')")
        data_elem = elem.find("data")
        data = dict(data_elem.attrib) if data_elem is not None else {}
        where = f"{src}: layer {lid} '{name}' ({ltype})"
        inputs = _ports(elem.find("input"), where)
        outputs = _ports(elem.find("output"), where)
        ids = [p.id for p in inputs + outputs]
        if len(set(ids)) != len(ids):
            raise InvalidInput(f"{where}: duplicate port ids {sorted(ids)}")
        layer = Layer(lid, name, ltype, elem.get("version", ""), data, inputs, outputs, src)
        layers.append(layer)
        by_id[lid] = layer
    if not layers:
        raise InvalidInput(f"{src}: the IR has no layers")
    model = IrModel(src, root.get("name", ""), version, layers, by_id)
    _read_edges(root, model)
    model.layers = _topological(model)
    return model


def _read_edges(root: Element, model: IrModel) -> None:
    src = model.path
    edges_elem = root.find("edges")
    edges = edges_elem.findall("edge") if edges_elem is not None else []
    for e in edges:
        fl, fp = (_int(e.get(k), k, f"{src}: <edge>") for k in ("from-layer", "from-port"))
        tl, tp = (_int(e.get(k), k, f"{src}: <edge>") for k in ("to-layer", "to-port"))
        text = f"edge {fl}:{fp} -> {tl}:{tp}"
        for lid in (fl, tl):
            if lid not in model.by_id:
                raise InvalidInput(f"{src}: {text} names layer {lid}, which does not exist")
        frm, to = model.by_id[fl], model.by_id[tl]
        if fp not in [p.id for p in frm.outputs]:
            raise InvalidInput(f"{frm.where}: {text}: the layer has no output port {fp}")
        if tp not in [p.id for p in to.inputs]:
            raise InvalidInput(f"{to.where}: {text}: the layer has no input port {tp}")
        if (tl, tp) in model.source_of:
            raise InvalidInput(f"{to.where}: input port {tp} has more than one incoming edge")
        model.source_of[(tl, tp)] = (fl, fp)
        model.fanout[(fl, fp)] = model.fanout.get((fl, fp), 0) + 1


def _topological(model: IrModel) -> list[Layer]:
    """Layers in an execution order (Kahn's algorithm, file order among ready layers)."""
    deps: dict[int, set[int]] = {layer.id: set() for layer in model.layers}
    users: dict[int, list[int]] = {layer.id: [] for layer in model.layers}
    for (tl, _tp), (fl, _fp) in model.source_of.items():
        if fl not in deps[tl]:
            deps[tl].add(fl)
            users[fl].append(tl)
    position = {layer.id: i for i, layer in enumerate(model.layers)}
    import heapq

    ready = [(position[i], i) for i, d in deps.items() if not d]
    heapq.heapify(ready)
    order = []
    while ready:
        _, lid = heapq.heappop(ready)
        order.append(model.by_id[lid])
        for u in users[lid]:
            deps[u].discard(lid)
            if not deps[u]:
                heapq.heappush(ready, (position[u], u))
    if len(order) != len(model.layers):
        stuck = next(layer for layer in model.layers if deps[layer.id])
        raise InvalidInput(f"{stuck.where}: the graph has a cycle through this layer")
    return order


# ---------------------------------------------------------------------------------------
# Attribute parsing
# ---------------------------------------------------------------------------------------
def attr_str(layer: Layer, key: str, default: str | None = None) -> str:
    value = layer.data.get(key, default)
    if value is None:
        raise InvalidInput(f"{layer.where}: missing attribute '{key}'")
    return value


def attr_int(layer: Layer, key: str, default: int | None = None) -> int:
    if key not in layer.data:
        if default is None:
            raise InvalidInput(f"{layer.where}: missing attribute '{key}'")
        return default
    return _int(layer.data[key], f"attribute '{key}'", layer.where)


def attr_float(layer: Layer, key: str, default: float | None = None) -> float:
    if key not in layer.data:
        if default is None:
            raise InvalidInput(f"{layer.where}: missing attribute '{key}'")
        return default
    try:
        return float(layer.data[key])
    except ValueError:
        raise InvalidInput(f"{layer.where}: attribute '{key}' must be a number, got "
                           f"{layer.data[key]!r}") from None


def attr_ints(layer: Layer, key: str, default: list[int] | None = None) -> list[int]:
    """A comma-separated integer list ("1,1" or "1, 1"; "" is the empty list)."""
    if key not in layer.data:
        if default is None:
            raise InvalidInput(f"{layer.where}: missing attribute '{key}'")
        return list(default)
    text = layer.data[key].strip()
    if not text:
        return []
    try:
        return [int(v) for v in text.split(",")]
    except ValueError:
        raise InvalidInput(f"{layer.where}: attribute '{key}' must be a list of integers, "
                           f"got {layer.data[key]!r}") from None


def attr_bool(layer: Layer, key: str, default: bool = False) -> bool:
    if key not in layer.data:
        return default
    text = layer.data[key].strip().lower()
    if text in ("true", "1"):
        return True
    if text in ("false", "0"):
        return False
    raise InvalidInput(f"{layer.where}: attribute '{key}' must be true or false, got "
                       f"{layer.data[key]!r}")
