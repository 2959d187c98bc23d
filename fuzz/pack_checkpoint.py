#!/usr/bin/env python3
"""Packs checkpoint directories into seeds of the `checkpoint` fuzz target.

    python3 fuzz/pack_checkpoint.py OUT_DIR CHECKPOINT_DIR...

Each seed is one mode byte then the files as [name length u8][name][data length u32 LE][data]
(see fuzz/fuzz_targets/checkpoint.rs); every checkpoint gives a seed with the manifest as
written (mode 0) and one whose manifest the target rewrites (mode 1 + algorithm index).
"""
import os
import struct
import sys

ALGOS = ["ppo", "dqn", "sac", "bc", "es"]


def pack(ck: str) -> bytes:
    out = b""
    for name in sorted(os.listdir(ck)):
        data = open(os.path.join(ck, name), "rb").read()
        out += bytes([len(name)]) + name.encode() + struct.pack("<I", len(data)) + data
    return out


def main() -> None:
    out_dir, cks = sys.argv[1], sys.argv[2:]
    os.makedirs(out_dir, exist_ok=True)
    for ck in cks:
        tag = os.path.basename(os.path.dirname(os.path.abspath(ck)))
        body = pack(ck)
        algo = open(os.path.join(ck, "checkpoint.json")).read()
        idx = next((i for i, a in enumerate(ALGOS) if f'"{a}"' in algo), 0)
        open(os.path.join(out_dir, f"{tag}_as_written"), "wb").write(bytes([0]) + body)
        open(os.path.join(out_dir, f"{tag}_rewritten"), "wb").write(bytes([1 | idx << 1]) + body)


if __name__ == "__main__":
    main()
