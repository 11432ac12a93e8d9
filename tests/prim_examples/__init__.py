"""Example inputs for every primitive, one module per family, collected by the registry test.

Each module defines `EXAMPLES: dict[str, list[callable]]`: primitive name -> functions of a
numpy Generator returning `(args, params)` in float64 where differentiable, away from kinks and
ties. Primitives whose outputs carry no derivative still need an example (forward is checked).
"""

import importlib
import pkgutil


def all_examples() -> dict:
    out: dict = {}
    for m in pkgutil.iter_modules(__path__):
        mod = importlib.import_module(f"{__name__}.{m.name}")
        for name, exs in getattr(mod, "EXAMPLES", {}).items():
            out.setdefault(name, []).extend(exs)
    return out
