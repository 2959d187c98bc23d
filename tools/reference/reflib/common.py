"""Shared helpers: the exact JSON format of the reference files and the version stamp.

File format (all reference files):

* compact separators ``,`` and ``:`` (no spaces), keys in insertion order, no trailing newline;
* floats in Python ``repr`` form (shortest round-trip decimal), so float32 values widened to
  float64 parse back bit-exactly;
* non-finite floats as the strings ``"inf"``, ``"-inf"``, ``"nan"``;
* numpy scalars / arrays are converted to Python ``int`` / ``float`` / ``bool`` / lists.
"""

from __future__ import annotations

import json
import math
import os
import platform
from importlib import metadata
from typing import Any

import numpy as np

SCHEMA_VERSION = 1

#: Versions stamped into every file, in this order: key -> candidate distribution names (the first
#: installed one is used; Gymnasium's box2d extra installs ``box2d-py`` on Python >= 3.14).
VERSIONED_DISTRIBUTIONS = (
    ("numpy", ("numpy",)),
    ("gymnasium", ("gymnasium",)),
    ("torch", ("torch",)),
    ("stable-baselines3", ("stable-baselines3",)),
    ("sb3-contrib", ("sb3-contrib",)),
    ("box2d", ("box2d", "box2d-py")),
    ("mujoco", ("mujoco",)),
)


def versions() -> dict:
    """Versions of the running interpreter and of the libraries, as installed (package metadata,
    so torch reads ``2.15.0`` rather than ``2.15.0+cu132``). A missing package is recorded as null."""
    out: dict[str, Any] = {"python": platform.python_version(), "platform": platform.machine()}
    for key, candidates in VERSIONED_DISTRIBUTIONS:
        out[key] = None
        for dist in candidates:
            try:
                out[key] = metadata.version(dist)
                break
            except metadata.PackageNotFoundError:
                continue
    return out


def f32(x: float) -> float:
    """Round a Python float to the nearest float32 value and widen it back."""
    return float(np.float32(x))


def to_jsonable(obj: Any) -> Any:
    """Recursively convert numpy values to plain Python ones and non-finite floats to strings."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        v = float(obj)
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return v
    if obj is None or isinstance(obj, str):
        return obj
    # torch tensors and anything else array-like
    if hasattr(obj, "tolist"):
        return to_jsonable(obj.tolist())
    raise TypeError(f"cannot serialise {type(obj)!r}")


def dumps(obj: Any) -> str:
    """Serialise exactly like the vendored reference files."""
    return json.dumps(to_jsonable(obj), separators=(",", ":"), allow_nan=False)


def write_json(path: str, obj: Any) -> None:
    """Write ``obj`` to ``path`` (parent directories are created); no trailing newline."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(dumps(obj))
