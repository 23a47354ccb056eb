"""Keep the repository's `datasets/` folder from shadowing Hugging Face's `datasets`.

Python started in the repository root puts the root first on `sys.path`, so `import datasets`
would find this project's folder (installed as `wantofight.datasets`). The folder's `__init__`
calls `hand_over` when it is imported under the bare name, and the import resolves to the
installed package instead.
"""

from __future__ import annotations

import importlib
import os
import sys


def hand_over(name: str, folder: str) -> None:
    """Replace `sys.modules[name]` (this folder) with the package of that name installed elsewhere."""
    root = os.path.dirname(os.path.abspath(folder))
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != root]
    shadow = sys.modules.pop(name)
    try:
        sys.modules[name] = importlib.import_module(name)
    except ImportError:
        sys.modules[name] = shadow
        raise ModuleNotFoundError(f"No module named {name!r} (the repository's {name}/ is wantofight.{name})",
                                  name=name) from None
    finally:
        sys.path[:] = saved
