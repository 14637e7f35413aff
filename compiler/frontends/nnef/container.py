"""Where an NNEF model's files come from: a graph.nnef file, a folder, or a tar container.

NNEF (spec section 5.1) stores a model as ``graph.nnef`` (structure), one ``.dat`` file per
variable at the path given by its label (``conv1/filter`` -> ``conv1/filter.dat``) and an
optional ``graph.quant``, possibly wrapped in a tar archive (optionally compressed).  This
module hides the difference: :func:`open_container` returns a :class:`Container` that
hands out the text files and the bytes of a variable's data file by label.
"""
from __future__ import annotations

import os
import tarfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from tosa_ir.errors import InvalidInput
from tosa_ir.limits import memory_budget
from tosa_ir.safe_io import check_regular_file, read_file

GRAPH_FILE = "graph.nnef"
QUANT_FILE = "graph.quant"
TAR_SUFFIXES = (".tar", ".tgz", ".tar.gz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")


@dataclass
class Container:
    """The files of one NNEF model.

    Attributes
    ----------
    source
        What the user named (path), for messages.
    graph_text, graph_name
        Content of graph.nnef and how to name it in messages.
    quant_text, quant_name
        Content of graph.quant (None when absent) and its name for messages.
    """

    source: str
    graph_text: str
    graph_name: str
    quant_text: str | None = None
    quant_name: str = ""
    _files: dict[str, object] = field(default_factory=dict)   # normalised rel path -> loader
    _names: dict[str, str] = field(default_factory=dict)      # normalised -> display name

    def data_file(self, label: str) -> tuple[bytes, str]:
        """Bytes and display name of the ``.dat`` file of variable ``label``.

        Labels are compared case-insensitively (spec 4.1.3); a leading ``/`` is ignored.
        """
        rel = label.lstrip("/") + ".dat"
        key = _norm(rel)
        if key not in self._files:
            raise InvalidInput(f"{self.source}: no data file {rel!r} for variable "
                               f"'{label}'")
        loader = self._files[key]
        try:
            return loader(), self._names[key]
        except (OSError, tarfile.TarError, EOFError) as err:
            raise InvalidInput(f"{self._names[key]}: cannot read: {err}") from None


def _norm(rel: str) -> str:
    return str(PurePosixPath(rel.replace("\\", "/"))).lower()


def _decode_text(raw: bytes, name: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InvalidInput(f"{name}: not a text file ({err.reason} at byte {err.start})") \
            from None


def open_container(path: str | os.PathLike) -> Container:
    """Open an NNEF model given as graph.nnef file, folder, or tar/tgz container.

    Raises
    ------
    InvalidInput
        Missing path or graph.nnef, unreadable or corrupted archive, non-text graph file.
    """
    p = Path(path)
    if not p.exists():
        raise InvalidInput(f"{p}: no such file or folder")
    if p.is_dir():
        return _from_folder(p, p / GRAPH_FILE)
    if p.name.lower().endswith(TAR_SUFFIXES) or (
            p.suffix.lower() != ".nnef" and tarfile.is_tarfile(p)):
        return _from_tar(p)
    return _from_folder(p.parent, p)


def _read_bytes(path: Path) -> bytes:
    """A regular file of at most the memory budget (tosa_ir/safe_io.py): a .dat that is a
    symlink to /dev/zero or a FIFO is refused, not read forever."""
    return read_file(path, "NNEF file")


def _from_folder(root: Path, graph_path: Path) -> Container:
    if not graph_path.is_file():
        raise InvalidInput(f"{root}: no {GRAPH_FILE} in this folder")
    graph_text = _decode_text(_read_bytes(graph_path), str(graph_path))
    quant_path = root / QUANT_FILE
    quant_text = None
    if graph_path.name == GRAPH_FILE and quant_path.is_file():
        quant_text = _decode_text(_read_bytes(quant_path), str(quant_path))
    files: dict[str, object] = {}
    names: dict[str, str] = {}
    for dirpath, _dirs, filenames in os.walk(root):
        for fname in filenames:
            if not fname.lower().endswith(".dat"):
                continue
            full = Path(dirpath) / fname
            key = _norm(str(full.relative_to(root).as_posix()))
            files[key] = (lambda f=full: _read_bytes(f))
            names[key] = str(full)
    return Container(str(graph_path if graph_path.name != GRAPH_FILE else root),
                     graph_text, str(graph_path), quant_text, str(quant_path),
                     files, names)


def _from_tar(path: Path) -> Container:
    """Read the container in one sequential pass (compressed archives cannot seek
    cheaply), keeping graph.nnef, graph.quant and every .dat file."""
    contents: dict[str, bytes] = {}
    total = 0
    check_regular_file(path, "NNEF container")
    try:
        with tarfile.open(path, "r:*") as tar:
            for member in tar:
                name = PurePosixPath(member.name)
                if not member.isfile() or not (name.name in (GRAPH_FILE, QUANT_FILE) or
                                               name.name.lower().endswith(".dat")):
                    continue
                if member.size > memory_budget():
                    # Checked from the member header, before a byte is decompressed.
                    raise InvalidInput(f"{path}!{member.name}: {member.size} bytes, more than the "
                                       f"memory budget of {memory_budget()} bytes (NPU_MEMORY_BUDGET)")
                total += member.size
                if total > memory_budget():
                    raise InvalidInput(f"{path}: its model files hold more than the memory budget of "
                                       f"{memory_budget()} bytes (NPU_MEMORY_BUDGET)")
                f = tar.extractfile(member)
                data = f.read(member.size + 1) if f is not None else b""
                if len(data) != member.size:
                    raise InvalidInput(f"{path}!{member.name}: truncated ({len(data)} of "
                                       f"{member.size} bytes)")
                contents[member.name] = data
    except (tarfile.TarError, OSError, EOFError, ValueError, zlib.error) as err:
        # tarfile's messages can span lines: keep the first.
        text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise InvalidInput(f"{path}: not a readable tar container: {text}") from None
    graphs = [n for n in contents if PurePosixPath(n).name == GRAPH_FILE]
    if not graphs:
        raise InvalidInput(f"{path}: container has no {GRAPH_FILE}")
    # The shallowest graph.nnef defines the model root (archives often add a top folder).
    graph = min(graphs, key=lambda n: len(PurePosixPath(n).parts))
    root = PurePosixPath(graph).parent
    graph_name = f"{path}!{graph}"
    graph_text = _decode_text(contents[graph], graph_name)
    quant_text, quant_name = None, f"{path}!{root / QUANT_FILE}"
    files: dict[str, object] = {}
    names: dict[str, str] = {}
    for name, data in contents.items():
        try:
            rel = PurePosixPath(name).relative_to(root)
        except ValueError:
            continue
        if str(rel) == QUANT_FILE:
            quant_text = _decode_text(data, quant_name)
        elif rel.name.lower().endswith(".dat"):
            key = _norm(str(rel))
            files[key] = (lambda d=data: d)
            names[key] = f"{path}!{name}"
    return Container(str(path), graph_text, graph_name, quant_text, quant_name, files, names)
