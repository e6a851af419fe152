"""The other examples' kernel runners and exporters, imported from their folders.

Each example is a folder of scripts, not a package, and their module names collide
(half_gemm/export.py and ort_matmulnbits/export.py; every run.py). So each module is loaded
from its file under a name of its own ("half_gemm.kernels" -> module "half_gemm_kernels"),
with its folder first on sys.path while it loads, for its own bare imports
(ort_matmulnbits/export.py's `import model`, which stays registered as "model": no other
example module this sweep loads is named so; engines.py takes it as `export.model`).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

kExamples = Path(__file__).resolve().parent.parent
kRepo = kExamples.parent


def example_module(example: str, module: str) -> ModuleType:
    """examples/<example>/<module>.py, loaded once."""
    name = f"{example}_{module}"
    if name in sys.modules:
        return sys.modules[name]
    folder = kExamples / example
    spec = importlib.util.spec_from_file_location(name, folder / f"{module}.py")
    if spec is None or spec.loader is None:
        raise ImportError(f"examples/{example}/{module}.py cannot be loaded")
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[name] = loaded
    sys.path.insert(0, str(folder))
    try:
        spec.loader.exec_module(loaded)
    except BaseException:
        del sys.modules[name]
        raise
    finally:
        sys.path.remove(str(folder))
    return loaded
