"""Finds the user's source line: the innermost frame outside the nova package."""

import os
import sys

_NOVA_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


_override: list = []  # a stack of source lines that replace the caller's (see `attributed_to`)


class attributed_to:
    """`with attributed_to(src):` equations recorded inside carry `src` as their user line (the
    backward equations of a VJP rule carry the line of the forward equation they differentiate)."""

    def __init__(self, source: str | None):
        self.source = source

    def __enter__(self):
        _override.append(self.source)

    def __exit__(self, *exc):
        _override.pop()
        return False


# id(code object) -> (the code object, whether it is Nova's own or frozen importlib code): a
# dictionary lookup per frame instead of two string prefix tests (the trace asks once per
# recorded equation). By identity: code objects of different files compare equal when their
# contents do (a user's copy of a Nova module), and the entry keeps its code alive, so its id
# is not reused while cached.
_inside: dict = {}
_INSIDE_LIMIT = 50_000


def user_frame_line() -> str | None:
    """'file.py:LINE' of the innermost caller outside nova/, or None."""
    if _override and _override[-1] is not None:
        return _override[-1]
    f = sys._getframe(1)
    inside = _inside
    while f is not None:
        code = f.f_code
        ent = inside.get(id(code))
        if ent is not None and ent[0] is code:
            mine = ent[1]
        else:
            fn = code.co_filename
            mine = fn.startswith(_NOVA_DIR) or fn.startswith("<frozen")
            if len(inside) >= _INSIDE_LIMIT:  # code made at run time (exec) must not pile up
                inside.clear()
            inside[id(code)] = (code, mine)
        if not mine:
            return f"{code.co_filename}:{f.f_lineno}"
        f = f.f_back
    return None


def short(src: str | None) -> str:
    """A shorter form of a source line for messages (path relative to the working directory)."""
    if not src:
        return "<unknown>"
    path, _, line = src.rpartition(":")
    try:
        rel = os.path.relpath(path)
        if not rel.startswith(".."):
            path = rel
    except ValueError:
        pass
    return f"{path}:{line}"
