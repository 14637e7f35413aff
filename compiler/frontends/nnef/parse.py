"""Parse an NNEF document with the Khronos parser and load its variables.

The ``nnef`` package (Khronos NNEF-Tools parser) does the whole syntax: flat and
compositional documents, fragment definitions, operator expressions, comprehensions,
compile-time if/else, generic fragments and graph.quant.  Its lowering expands compound
fragments into their bodies; we ask it to lower everything down to the operations
:mod:`compiler.frontends.nnef.convert` maps, keeping the compound operations that have a
direct TOSA counterpart (relu, max_pool, softmax, linear, ...) whole.  Fragments defined in
the document itself are found by parsing, then lowered by parsing again (until none is
left); a fragment declared without a body is a custom operation: :class:`Unsupported`.

Parser and shape errors become :class:`InvalidInput` naming the file, line and column.
The parser runs in a forked process (it is C++ and can crash on malformed input) and sends
back the graph as plain Python data (:class:`PlainGraph`, identifiers as :class:`Ref`).
"""
from __future__ import annotations

import faulthandler
import multiprocessing
import re
from dataclasses import dataclass, field

import nnef

from compiler.frontends.nnef.container import Container
from compiler.frontends.nnef.dat import DatTensor, read_dat
from tosa_ir.address_space import address_space_cap
from tosa_ir.errors import InvalidInput, Unsupported

# Standard operations the converter maps as a whole (not through their stdlib body).
KEEP_WHOLE = frozenset({
    "relu", "sigmoid", "tanh", "softmax", "clamp", "min", "max", "max_pool", "avg_pool",
    "linear", "mean_reduce",
})

# Every standard operation that has a compound definition in the Khronos stdlib.  Naming a
# primitive in ``lowered`` is harmless, so the list may be generous.
STD_COMPOUND = frozenset("""
sqr sqrt rsqr rsqrt log2 min max clamp mean_reduce moments relu sigmoid softabs softmax
softplus elu selu gelu silu prelu leaky_relu max_pool_with_index max_pool avg_pool rms_pool
linear separable_conv separable_deconv local_response_normalization
local_mean_normalization local_variance_normalization local_contrast_normalization
l1_normalization l2_normalization batch_normalization avg_roi_align max_roi_align
min_max_linear_quantize zero_point_linear_quantize linear_quantize logarithmic_quantize
copy_n add_n nearest_downsample area_downsample nearest_upsample
""".split())

_STANDARD = frozenset(nnef.StandardOperations) | STD_COMPOUND

_ERROR_RE = re.compile(r"^(?P<kind>[\w ]*?error) in '(?P<file>[^']*)' "
                       r"\[(?P<line>\d+):(?P<col>\d+)\]:? ?(?P<msg>.*)$", re.S)


class Ref(str):
    """A tensor identifier in an operation's inputs/outputs (not a string literal)."""


@dataclass
class PlainTensor:
    name: str
    dtype: str
    shape: list[int] | None
    quantization: dict


@dataclass
class PlainOp:
    name: str
    attribs: dict
    inputs: dict
    outputs: dict
    dtype: str | None


@dataclass
class PlainGraph:
    """The parsed graph as plain Python data (what the parser process sends back)."""

    name: str
    tensors: dict[str, PlainTensor]
    operations: list[PlainOp]
    inputs: list[str]
    outputs: list[str]


@dataclass
class ParsedModel:
    """A parsed, lowered, shape-inferred NNEF graph and its variables' data.

    ``graph`` is a :class:`PlainGraph` (tensors carry inferred shapes and graph.quant
    entries in ``quantization``); ``data`` maps variable tensor names to their decoded
    data files; ``files`` maps them to the data file's display name.
    """

    graph: PlainGraph
    container: Container
    data: dict[str, DatTensor] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)


class _Failure(Exception):
    """A user error found in the parser process: (kind, message) crosses the pipe."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def _translate(err: Exception, graph_name: str, quant_name: str) -> _Failure:
    text = str(err.args[0]) if err.args else str(err)
    m = _ERROR_RE.match(text)
    if not m:
        return _Failure("invalid", f"{graph_name}: {text}")
    name = quant_name if m["file"] == "quantization" else graph_name
    return _Failure("invalid", f"{name}:{m['line']}:{m['col']}: {m['msg'].strip()}")


def _plain(value):
    if isinstance(value, nnef.Identifier):
        return Ref(str(value))
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    return value


def _parse_document(graph_text: str, quant_text: str | None, graph_name: str,
                    quant_name: str) -> PlainGraph:
    """Parse, lower and shape-infer (runs in the parser process)."""

    def parse(lowered):
        try:
            return nnef.parse_string(graph_text, quant_text, lowered=sorted(lowered))
        except nnef.Error as err:
            raise _translate(err, graph_name, quant_name) from None
        except (ValueError, TypeError, RuntimeError) as err:   # parser hiccups
            raise _Failure("invalid", f"{graph_name}: {err}") from None

    lowered = set(STD_COMPOUND - KEEP_WHOLE)
    graph = parse(lowered)
    # Lower the document's own fragments; bodies may call further fragments, so repeat.
    for _ in range(64):
        new = {op.name for op in graph.operations if op.name not in _STANDARD} - lowered
        if not new:
            break
        lowered |= new
        graph = parse(lowered)
    custom = sorted({op.name for op in graph.operations if op.name not in _STANDARD})
    if custom:
        op = next(o for o in graph.operations if o.name == custom[0])
        raise _Failure("unsupported", f"{graph_name}: custom operation '{custom[0]}' (result "
                                      f"{', '.join(map(str, op.outputs.values()))}) has no "
                                      f"definition and no TOSA mapping")
    # The Khronos shape check of graph.quant parameters broadcasts numpy-style, rejecting
    # per-channel parameters of [1, C] biases; NNEF broadcasting (trailing singletons) is
    # checked where the parameters are used.  Infer shapes without them.
    quant = {name: t.quantization for name, t in graph.tensors.items()}
    for name, t in list(graph.tensors.items()):
        graph.tensors[name] = nnef.Tensor(t.name, t.dtype, t.shape, t.data, {})
    try:
        nnef.infer_shapes(graph)
    except nnef.Error as err:
        raise _translate(err, graph_name, quant_name) from None
    except (AssertionError, ValueError, TypeError, IndexError, KeyError, ZeroDivisionError) \
            as err:
        raise _Failure("invalid", f"{graph_name}: shape inference failed: "
                                  f"{err or type(err).__name__}") from None
    tensors = {str(n): PlainTensor(str(t.name), t.dtype, list(t.shape) if t.shape is not None
                                   else None, dict(quant[n] or {}))
               for n, t in graph.tensors.items()}
    ops = [PlainOp(op.name, {k: _plain(v) for k, v in op.attribs.items()},
                   {k: _plain(v) for k, v in op.inputs.items()},
                   {k: _plain(v) for k, v in op.outputs.items()}, op.dtype)
           for op in graph.operations]
    return PlainGraph(graph.name, tensors, ops, [str(n) for n in graph.inputs],
                      [str(n) for n in graph.outputs])


# The parser child's bounds: fragments expand exponentially (``e(x, n) = e(x, n-1) +
# e(x, n-1)`` doubles per level), so a small document can take hours and any memory.  No
# real model needs more than a few seconds of parsing; the child is killed past these.
PARSE_SECONDS = 30.0
PARSE_MEMORY = 2 << 30      # bytes of address space added to the child's at fork


def _child(conn, args) -> None:
    faulthandler.disable()     # a parser crash is reported by the parent, in one line
    with address_space_cap(PARSE_MEMORY):
        try:
            conn.send(("ok", _parse_document(*args)))
        except _Failure as err:
            conn.send((err.kind, str(err)))
        except MemoryError:
            conn.send(("memory", ""))
        except Exception as err:                      # any parser problem is the file's fault
            conn.send(("invalid", f"{args[2]}: cannot parse: {type(err).__name__}: {err}"))
        finally:
            conn.close()


def _run_parser(container: Container) -> PlainGraph:
    """Run the Khronos parser in a forked process.

    The parser is C++ and crashes (SIGSEGV) on some malformed documents, e.g. a stray
    ``-`` before an assignment: in a child process that is one InvalidInput instead of
    the end of the caller.
    """
    args = (container.graph_text, container.quant_text, container.graph_name,
            container.quant_name or "graph.quant")
    try:
        ctx = multiprocessing.get_context("fork")
    except ValueError:                            # no fork (not POSIX): parse in process
        ctx = None
    if ctx is None:
        try:
            return _parse_document(*args)
        except _Failure as err:
            raise (Unsupported if err.kind == "unsupported" else InvalidInput)(str(err)) \
                from None
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, args), daemon=True)
    proc.start()
    send.close()
    timed_out = False
    try:
        if receive.poll(PARSE_SECONDS):
            kind, payload = receive.recv()
        else:
            timed_out, kind, payload = True, None, None
            proc.kill()
    except EOFError:
        kind, payload = None, None
    finally:
        receive.close()
        proc.join()
    if timed_out:
        raise InvalidInput(f"{container.graph_name}: the document did not finish parsing within "
                           f"{PARSE_SECONDS:.0f} s (fragments that expand without bound?)")
    if kind is None and proc.exitcode is not None and proc.exitcode < 0 or kind == "memory":
        raise InvalidInput(f"{container.graph_name}: malformed NNEF document: parsing it needs more "
                           f"than {PARSE_MEMORY >> 30} GiB or crashed the parser (exit code {proc.exitcode})")
    if kind is None:
        raise InvalidInput(f"{container.graph_name}: malformed NNEF document: the Khronos "
                           f"parser crashed on it (exit code {proc.exitcode})")
    if kind == "ok":
        return payload
    raise (Unsupported if kind == "unsupported" else InvalidInput)(payload)


def parse_model(container: Container) -> ParsedModel:
    """Parse, lower and shape-infer the document, then read every variable's data.

    Raises
    ------
    InvalidInput
        Syntax or semantic errors (with file:line:column), shape errors, missing or bad
        data files, data shapes that disagree with the graph, documents that crash the
        parser.
    Unsupported
        Custom operations (fragments declared without a body).
    """
    model = ParsedModel(_run_parser(container), container)
    _load_variables(model)
    return model


def _load_variables(model: ParsedModel) -> None:
    graph, container = model.graph, model.container
    for op in graph.operations:
        if op.name != "variable":
            continue
        name = str(op.outputs["output"])
        label = str(op.attribs["label"])
        raw, fname = container.data_file(label)
        dat = read_dat(raw, fname)
        declared = [int(d) for d in op.attribs["shape"]]
        if list(dat.shape) != declared:
            raise InvalidInput(f"{fname}: tensor shape {list(dat.shape)} does not match the "
                               f"shape {declared} of variable '{label}' in "
                               f"{container.graph_name}")
        want = op.dtype or "scalar"
        if want == "logical" and dat.kind != "bool":
            raise InvalidInput(f"{fname}: variable '{label}' is logical but the file holds "
                               f"{dat.kind} data")
        if want != "logical" and dat.kind == "bool":
            raise InvalidInput(f"{fname}: variable '{label}' is {want} but the file holds "
                               f"bool data")
        if dat.kind == "qint" and not graph.tensors[name].quantization:
            quant = container.quant_name or "graph.quant"
            raise InvalidInput(f"{fname}: holds quantized codes but {quant} has no entry "
                               f"for '{name}' to interpret them")
        model.data[name] = dat
        model.files[name] = fname
