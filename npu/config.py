"""The ``--config`` option of every ``npu`` command: a named or JSON hardware configuration."""
from __future__ import annotations

import json
from pathlib import Path

from isa.config import NAMED_CONFIGS, NpuConfig
from tosa_ir.errors import InvalidInput

__all__ = ["load_config"]


def load_config(spec: str) -> NpuConfig:
    """The NpuConfig named by ``--config``: a name of ``isa.config.NAMED_CONFIGS`` or a JSON file."""
    if spec in NAMED_CONFIGS:
        return NAMED_CONFIGS[spec]
    try:
        return NpuConfig.from_dict(json.loads(Path(spec).read_text()))
    except OSError as e:
        raise InvalidInput(f"{spec}: cannot read configuration: {e.strerror}") from None
    except (ValueError, TypeError) as e:
        raise InvalidInput(f"{spec}: bad configuration: {e}") from None
