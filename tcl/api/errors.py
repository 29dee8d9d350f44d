"""The one error type users see: the CLI prints it as one line and exits with status 2."""


class TclError(Exception):
    """A user-facing problem (bad input, unknown name, broken file) with a one-line message."""
