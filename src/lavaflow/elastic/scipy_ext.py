"""scipy's compiled extension modules, loaded on their own.

Importing a scipy subpackage runs its ``__init__``, which imports most of it (``scipy.optimize``
brings linear programming, minimisers and parsed docstrings, ``scipy.spatial`` and
``scipy.interpolate`` bring ``scipy.linalg``, ``scipy.sparse`` and ``scipy.special``): tenths of a
second each, for the one extension module lavaflow calls.  :func:`extension` loads that module
from its file instead (the same compiled code, so the same results), registered in ``sys.modules``
under its own name so that a later import of its package uses it; None with any other layout of
scipy or any trouble doing so, for the caller to fall back to the public import.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def extension(name: str, register: bool = True) -> ModuleType | None:
    """The extension module ``name`` (``"scipy.optimize._lsap"``), loaded without its package's
    ``__init__``, or None.  ``register``: put it in ``sys.modules`` (needed when another extension
    imports it by name)."""
    hit = sys.modules.get(name)
    if hit is not None:
        return hit
    try:
        spec = importlib.util.find_spec("scipy")
        if spec is None or spec.origin is None:
            return None
        *package, leaf = name.split(".")[1:]
        folder = Path(spec.origin).parent.joinpath(*package)
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = folder / f"{leaf}{suffix}"
            if path.is_file():
                loader = importlib.machinery.ExtensionFileLoader(name, str(path))
                ext = importlib.util.spec_from_file_location(name, str(path), loader=loader)
                if ext is None:
                    return None
                module = importlib.util.module_from_spec(ext)
                if register:
                    sys.modules[name] = module
                try:
                    loader.exec_module(module)
                except BaseException:
                    if register:
                        sys.modules.pop(name, None)
                    raise
                return module
    except Exception:  # noqa: BLE001 - any trouble: the caller's public import
        return None
    return None


__all__ = ["extension"]
