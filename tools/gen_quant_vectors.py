#!/usr/bin/env python3
"""Writes the test vectors that tests/core/test_quants.c and tests/core/test_mlx.c check
the C reference dequantizers against, bit for bit.

usage: gen_quant_vectors.py OUTDIR [--fixtures DIR]
needs: numpy, gguf (pip install numpy gguf)

Expected values for the ggml formats come from gguf-py (gguf.quants); expected values for
MLX affine come from an independent NumPy implementation of the documented format below
(np.unpackbits over the row's bytes), never from the C code under test.

All integers are little-endian; strings are not NUL-terminated.

OUTDIR/gguf_vectors.bin     "AKQV" u32 version=1, then records to the end of the file:
    u32 kind, u32 ggml_type, u32 n_values, u32 n_bytes, then
    kind 0 (dequantize): u8 blocks[n_bytes], f32 expected[n_values]   (gguf.quants.dequantize)
    kind 1 (quantize):   f32 input[n_values], u8 expected[n_bytes]    (gguf.quants.quantize; Q8_0, Q4_0)
  Blocks are random bytes except that every f16 scale field (and every F16/BF16 value)
  is forced finite, so no NaN reaches the comparison.

OUTDIR/mlx_vectors.bin      "AKMX" u32 version=1, then records to the end of the file:
    u32 bits, u32 group_size, u32 sb_type (0 f32, 1 f16, 2 bf16), u32 rows, u32 n,
    u32 words[rows * n*bits/32], sb scales[rows * n/group_size], sb biases[same],
    f32 expected[rows * n]
  MLX affine format: each row is a little-endian bit stream of `bits`-bit codes (code k
  at stream bits k*bits .. k*bits+bits-1; stream bit b is bit b%32 of word b/32, i.e.
  the row's bytes LSB first), group g of the row has scale s and bias c, and value k is
  float32(float32(s) * k_code) + float32(c), rounded after each operation.

OUTDIR/fixture_vectors.bin  "AKFX" u32 version=1, then one record per GGUF file found as
  FIXTURES/*/*.gguf:
    u32 path_len, path (relative to FIXTURES), u32 n_tensors, then per tensor:
    u32 name_len, name, u32 ggml_type, u64 n_values, f32 values[n_values]
  (gguf.quants.dequantize of the tensor's data, in file order).
"""
import argparse
import os
import struct
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFReader
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize, quantize

SEED = 20240611

# Byte offsets of the f16 scale fields inside one block, from the public layouts.
F16_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}
BLOCK_COUNTS = [1, 2, 7, 64]  # one record per count: several random blocks each


def finite_f16_bits(rng, n):
    """Random f16 bit patterns with exponent < 31 (finite, subnormals included)."""
    h = rng.integers(0, 1 << 16, size=n, dtype=np.uint32).astype(np.uint16)
    bad = (h & 0x7C00) == 0x7C00
    h[bad] &= np.uint16(0xBFFF)  # clear the top exponent bit
    return h


def finite_bf16_bits(rng, n):
    h = rng.integers(0, 1 << 16, size=n, dtype=np.uint32).astype(np.uint16)
    bad = (h & 0x7F80) == 0x7F80
    h[bad] &= np.uint16(0xBFFF)
    return h


def ggml_blocks(rng, qtype, n_blocks):
    """Random bytes for n_blocks blocks of qtype with finite scales/values."""
    block, size = GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint32).astype(np.uint8)
    if qtype == T.F16:
        raw = finite_f16_bits(rng, n_blocks).view(np.uint8).reshape(n_blocks, 2)
    elif qtype == T.BF16:
        raw = finite_bf16_bits(rng, n_blocks).view(np.uint8).reshape(n_blocks, 2)
    else:
        for off in F16_FIELDS[qtype]:
            raw[:, off:off + 2] = finite_f16_bits(rng, n_blocks).view(np.uint8).reshape(n_blocks, 2)
    # Edge blocks: all-zero and all-ones payloads (scales kept finite).
    if n_blocks >= 7 and qtype not in (T.F16, T.BF16):
        raw[1, :] = 0xFF
        raw[2, :] = 0x00
        for off in F16_FIELDS[qtype]:
            raw[1, off:off + 2] = [0xFF, 0x3B]  # 0.99951171875
            raw[2, off:off + 2] = [0x00, 0x3C]  # 1.0
    return raw, block * n_blocks


def write_gguf_vectors(path, rng):
    types = [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K,
             T.Q6_K, T.F16, T.BF16]
    count = 0
    with open(path, "wb") as f:
        f.write(b"AKQV" + struct.pack("<I", 1))
        for qt in types:
            for nb in BLOCK_COUNTS:
                raw, n = ggml_blocks(rng, qt, nb if qt not in (T.F16, T.BF16) else nb * 256)
                ref = dequantize(raw.reshape(-1), qt).astype(np.float32, copy=False).reshape(-1)
                assert ref.size == n and np.isfinite(ref).all(), qt.name
                f.write(struct.pack("<IIII", 0, int(qt), n, raw.size))
                f.write(raw.tobytes())
                f.write(ref.tobytes())
                count += 1
        # Q8_0 and Q4_0 quantizers (the KV cache's): random floats over several
        # magnitudes, plus zero blocks.
        for qt in (T.Q8_0, T.Q4_0):
            for nb in BLOCK_COUNTS:
                x = rng.standard_normal(nb * 32).astype(np.float32)
                x *= np.repeat(np.float32(10.0) ** rng.integers(-6, 6, size=nb), 32).astype(np.float32)
                if nb >= 7:
                    x[32:64] = 0
                q = quantize(x.reshape(nb, 32), qt).reshape(-1)
                f.write(struct.pack("<IIII", 1, int(qt), x.size, q.size))
                f.write(x.tobytes())
                f.write(q.tobytes())
                count += 1
    return count


# ---- MLX affine: an independent NumPy model of the documented layout ----

def mlx_unpack(words, bits, n):
    """Codes of each row: the row's bytes as one LSB-first bit stream."""
    rows = words.shape[0]
    stream = np.unpackbits(words.astype("<u4").view(np.uint8).reshape(rows, -1), axis=1,
                           bitorder="little")
    digits = stream[:, : n * bits].reshape(rows, n, bits).astype(np.uint32)
    return (digits << np.arange(bits, dtype=np.uint32)).sum(axis=2).astype(np.uint32)


def sb_to_f32(raw, sb_type):
    if sb_type == 0:
        return raw.view(np.float32)
    if sb_type == 1:
        return raw.view(np.float16).astype(np.float32)
    return (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)


def sb_random(rng, sb_type, count):
    if sb_type == 0:  # float32 over many magnitudes, both signs
        x = rng.standard_normal(count) * 10.0 ** rng.integers(-30, 30, size=count)
        return x.astype(np.float32)
    if sb_type == 1:
        return finite_f16_bits(rng, count)
    return finite_bf16_bits(rng, count)


def write_mlx_vectors(path, rng):
    count = 0
    with open(path, "wb") as f:
        f.write(b"AKMX" + struct.pack("<I", 1))
        for bits in (2, 3, 4, 5, 6, 8):
            for group in (32, 64, 128):
                for sb_type in (0, 1, 2):
                    rows, n = 3, group * int(rng.integers(1, 5))
                    words = rng.integers(0, 1 << 32, size=(rows, n * bits // 32),
                                         dtype=np.uint64).astype(np.uint32)
                    scales = sb_random(rng, sb_type, rows * (n // group))
                    biases = sb_random(rng, sb_type, rows * (n // group))
                    q = mlx_unpack(words, bits, n).astype(np.float32)
                    s = np.repeat(sb_to_f32(scales, sb_type).reshape(rows, -1), group, axis=1)
                    c = np.repeat(sb_to_f32(biases, sb_type).reshape(rows, -1), group, axis=1)
                    with np.errstate(over="ignore"):
                        prod = (s * q).astype(np.float32)
                        ref = (prod + c).astype(np.float32)
                    f.write(struct.pack("<IIIII", bits, group, sb_type, rows, n))
                    f.write(words.astype("<u4").tobytes())
                    f.write(scales.tobytes())
                    f.write(biases.tobytes())
                    f.write(ref.tobytes())
                    count += 1
    return count


def write_fixture_vectors(path, fixtures):
    files = []
    if os.path.isdir(fixtures):
        for sub in sorted(os.listdir(fixtures)):
            d = os.path.join(fixtures, sub)
            if os.path.isdir(d):
                files += [os.path.join(sub, x) for x in sorted(os.listdir(d)) if x.endswith(".gguf")]
    n_tensors = 0
    with open(path, "wb") as f:
        f.write(b"AKFX" + struct.pack("<I", 1))
        for rel in files:
            reader = GGUFReader(os.path.join(fixtures, rel))
            f.write(struct.pack("<I", len(rel.encode())) + rel.encode())
            f.write(struct.pack("<I", len(reader.tensors)))
            for t in reader.tensors:
                vals = dequantize(t.data, t.tensor_type).astype(np.float32, copy=False).reshape(-1)
                assert vals.size == int(t.n_elements), t.name
                name = t.name.encode()
                f.write(struct.pack("<I", len(name)) + name)
                f.write(struct.pack("<IQ", int(t.tensor_type), vals.size))
                f.write(np.ascontiguousarray(vals).tobytes())
                n_tensors += 1
    return len(files), n_tensors


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_fx = os.environ.get("AKUNU_FIXTURES",
                                os.path.join(here, "..", "..", "shared", "fixtures", "hf"))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--fixtures", default=default_fx, help="folder of */*.gguf fixtures")
    args = ap.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    rng = np.random.default_rng(SEED)
    ng = write_gguf_vectors(os.path.join(args.outdir, "gguf_vectors.bin"), rng)
    nm = write_mlx_vectors(os.path.join(args.outdir, "mlx_vectors.bin"), rng)
    nf, nt = write_fixture_vectors(os.path.join(args.outdir, "fixture_vectors.bin"), args.fixtures)
    print(f"{args.outdir}: {ng} ggml records, {nm} MLX records, {nt} tensors of {nf} fixture files")
    if nf == 0:
        print(f"warning: no */*.gguf under {args.fixtures}", file=sys.stderr)


if __name__ == "__main__":
    main()
