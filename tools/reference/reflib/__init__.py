"""Recorder for the reference data in ``testdata/reference`` (see ``tools/reference/README.md``).

Modules:

* :mod:`reflib.common`  -- JSON serialisation, version stamp, float32 helpers.
* :mod:`reflib.envs`    -- Gymnasium trajectories (``envs/<KEY>.json``).
* :mod:`reflib.ports`   -- the float32-aware Python ports checked in ``port_check_f32_aware``.
* :mod:`reflib.returns` -- GAE / n-step / V-trace (``returns_ref.json``).
* :mod:`reflib.dists`   -- SB3 distributions, PPO clip and Huber losses (``dists_ref.json``).

Importing the package pins Intel MKL to its conditional-numerical-reproducibility mode
``MKL_CBWR=COMPATIBLE`` before torch is loaded: torch evaluates ``exp`` / ``log`` / ``tanh`` of
contiguous tensors through MKL's vector math library, whose results otherwise depend on the CPU
(vendor and instruction set). The reference files were recorded with the COMPATIBLE code path.
"""

import os as _os
import sys as _sys

if "torch" in _sys.modules:
    print("reflib: torch was imported before reflib; MKL_CBWR may not take effect", file=_sys.stderr)
if _os.environ.get("MKL_CBWR", "COMPATIBLE") != "COMPATIBLE":
    print(f"reflib: overriding MKL_CBWR={_os.environ['MKL_CBWR']} with COMPATIBLE", file=_sys.stderr)
_os.environ["MKL_CBWR"] = "COMPATIBLE"
