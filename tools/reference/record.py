#!/usr/bin/env python3
"""Regenerate the reference data of ``testdata/reference``.

    python tools/reference/record.py --out DIR [--only envs|returns|dists ...] [--env KEY ...]
                                     [--compare testdata/reference]

writes ``DIR/envs/<KEY>.json``, ``DIR/returns_ref.json``, ``DIR/dists_ref.json`` and
``DIR/multi_agent/<KEY>.json``. With
``--compare REF`` every written file is compared byte for byte with the file of the same name
under ``REF`` and the exit status is 1 if any differs. See ``tools/reference/README.md``.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import sys

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import importlib  # noqa: E402


def part(name: str):
    """A part's module, imported when asked for (each needs only its own packages)."""
    return importlib.import_module(f"reflib.{name}")


PARTS = ("envs", "returns", "dists", "multi_agent")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output directory (created if missing)")
    ap.add_argument("--only", nargs="+", choices=PARTS, default=list(PARTS), help="which files to write")
    ap.add_argument("--env", nargs="+", metavar="KEY", help="restrict envs/ to these keys")
    ap.add_argument("--compare", metavar="REF", help="compare the written files byte for byte with REF")
    args = ap.parse_args(argv)

    written: list[str] = []
    if "envs" in args.only:
        written += part("envs").write_all(args.out, args.env)
    if "returns" in args.only:
        written.append(part("returns").write(args.out))
    if "dists" in args.only:
        written.append(part("dists").write(args.out))
    if "multi_agent" in args.only:
        written += part("multi_agent").write_all(args.out)

    status = 0
    for path in written:
        rel = os.path.relpath(path, args.out)
        if args.compare:
            ref = os.path.join(args.compare, rel)
            same = os.path.exists(ref) and filecmp.cmp(path, ref, shallow=False)
            print(f"{'identical' if same else 'DIFFERS  '}  {rel}")
            status |= not same
        else:
            print(f"wrote {rel}")
    return status


if __name__ == "__main__":
    sys.exit(main())
