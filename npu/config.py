"""The ``--config`` option of every ``npu`` command: a named or JSON hardware configuration."""
from __future__ import annotations

from isa.config import DEFAULT_CONFIG, NAMED_CONFIGS, NpuConfig
from tosa_ir.safe_io import load_json
from tosa_ir.errors import InvalidInput

__all__ = ["load_config"]


def load_config(spec: str | None) -> NpuConfig:
    """The NpuConfig named by ``--config``: a name of ``isa.config.NAMED_CONFIGS`` or a JSON
    file (read with the bounded JSON reader); None is the default configuration."""
    if spec is None:
        return DEFAULT_CONFIG
    if spec in NAMED_CONFIGS:
        return NAMED_CONFIGS[spec]
    data = load_json(spec, "configuration")
    try:
        return NpuConfig.from_dict(data)
    except (ValueError, TypeError, OverflowError) as e:
        raise InvalidInput(f"{spec}: bad configuration: {e}") from None
