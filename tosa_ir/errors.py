"""User-facing error classes, and the CLI exit code each maps to.

Every error a user can cause (bad file, illegal graph, unsupported operator, program that
does not fit) is one of these, with a message that names the problem and where it is.  The
CLI prints ``str(error)`` on one line and exits with ``error.exit_code``; anything else is
a bug in this project and keeps its traceback.
"""


class NpuError(Exception):
    """Base of all user-facing errors."""

    exit_code = 1


class InvalidInput(NpuError):
    """Unreadable or malformed file, or an illegal graph (exit code 2)."""

    exit_code = 2


class Unsupported(NpuError):
    """Well-formed input that this project does not support (exit code 3)."""

    exit_code = 3


class TosaError(InvalidInput):
    """A TOSA ERROR_IF condition holds: the graph is illegal, its result is tosa_error.

    ``op`` is the operator name, ``arg`` the argument at fault, ``condition`` the violated
    condition as the spec writes it.
    """

    def __init__(self, op: str, arg: str, condition: str, where: str = ""):
        self.op, self.arg, self.condition, self.where = op, arg, condition, where
        at = f" at {where}" if where else ""
        super().__init__(f"{op}{at}: ERROR_IF({condition}) on argument {arg!r}")


class TosaUnpredictable(NpuError):
    """A REQUIRE or LEVEL_CHECK failed: the graph's result is unpredictable (not an error).

    Raised by the reference interpreter; ``kind`` is ``"REQUIRE"`` or ``"LEVEL_CHECK"``.
    """

    exit_code = 2

    def __init__(self, op: str, kind: str, condition: str, where: str = ""):
        self.op, self.kind, self.condition, self.where = op, kind, condition, where
        at = f" at {where}" if where else ""
        super().__init__(f"{op}{at}: {kind}({condition}) failed: result is unpredictable")


class LevelRejected(InvalidInput):
    """A failed LEVEL_CHECK the implementation answers by rejecting the graph (exit code 2).

    The spec makes the result of a failed LEVEL_CHECK unpredictable, so any behaviour is
    compliant; rejecting is what the official reference model does and what the official
    conformance suite expects (its rank > MAX_RANK tests are negative tests).  Used for
    rank(shape) <= MAX_RANK: no tensor of the project goes past rank 6 at level 8K.
    """

    def __init__(self, op: str, condition: str, where: str = ""):
        self.op, self.condition, self.where = op, condition, where
        at = f" at {where}" if where else ""
        super().__init__(f"{op}{at}: LEVEL_CHECK({condition}) failed: graph rejected (a failed "
                         f"LEVEL_CHECK is unpredictable in the spec, so rejecting it is compliant; "
                         f"the official conformance suite expects this rejection)")
