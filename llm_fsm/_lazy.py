"""Lazy re-exports for package ``__init__`` modules (PEP 562), written once.

A package's public names are listed with the module that defines them; each is imported on first
access. Importing a package, or one module inside it, then costs nothing but this table: the reason
``import llm_fsm`` and a cold ``fsm-lint`` stay cheap.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, str | tuple[str, str]], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``.

    ``exports`` maps a public name to the module defining it (same name there) or to a
    ``(module, name)`` pair. A name once imported is stored in ``namespace``, so later
    lookups do not come back here.
    """

    def __getattr__(name: str) -> Any:
        target = exports.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, attribute = (target, name) if isinstance(target, str) else target
        value = getattr(importlib.import_module(module), attribute)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return __getattr__, __dir__
