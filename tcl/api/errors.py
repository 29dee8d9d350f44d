"""The one error type users see: the CLI prints it as one line and exits with status 2."""


class TclError(Exception):
    """A user-facing problem (bad input, unknown name, broken file) with a one-line message."""


def one_line(exc: BaseException) -> str:
    """``exc`` in one line, for a TclError that wraps it: its first line, and TVM's "Error
    message:" line when the text has one (TVM's schedule errors put the whole IR between)."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    detail = next((line for line in lines[1:] if line.startswith("Error message:")), None)
    return f"{lines[0]} {detail}" if detail else lines[0]
