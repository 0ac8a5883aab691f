#!/usr/bin/env python3
"""Rewrite the 2-D weight matrices of a GGUF file into another storage type.

    requant.py IN.gguf OUT.gguf TYPE      TYPE: F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0
                                                Q2_K Q3_K Q4_K Q5_K Q6_K

Metadata is copied unchanged; 1-D tensors (norms, biases) stay as they are. gguf-py's
quantizer is used where it has one (F16, BF16, 32-value blocks); the k-quants use the
simple quantizers below (nearest rounding, min/max scales: not ggml's search, so the
error is a little larger than llama-quantize's, never smaller).

K-quant blocks are 256 values, so a matrix whose rows (ne0) are not a multiple of 256
cannot be stored that way. Like llama.cpp, such matrices fall back to a 32-block type
of similar size: Q2_K, Q3_K -> Q4_0 (llama.cpp uses IQ4_NL, which akunu does not
read); Q4_K -> Q5_0; Q5_K -> Q5_1; Q6_K -> Q8_0. Each fallback is printed.

After writing, every quantized tensor is dequantized again with gguf-py and its
relative L2 error printed, which also checks the hand-written block layouts.
"""
import argparse
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT

FALLBACK = {"Q2_K": "Q4_0", "Q3_K": "Q4_0", "Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}
TYPES = ["F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"]


def f16_bytes(a):
    """float array (nb,) -> (nb, 2) little-endian f16 bytes."""
    return a.astype("<f2").view(np.uint8).reshape(-1, 2)


def f16_round(a):
    return a.astype(np.float16).astype(np.float32)


def safe_div(a, b):
    return np.where(b != 0, a / np.where(b != 0, b, 1), 0)


def affine_sub(x, nlev):
    """Per sub-block (last axis) scale and min for x = scale*q - min, q in 0..nlev."""
    mn = np.minimum(x.min(axis=-1), 0)
    mx = x.max(axis=-1)
    return (mx - mn) / nlev, -mn


def quant_scales(v, nbits_max):
    """Unsigned per-sub-block values v (nb, ns) -> (super-block factor f16, ints)."""
    d = f16_round(v.max(axis=-1) / nbits_max)
    q = np.clip(np.rint(safe_div(v, d[:, None])), 0, nbits_max).astype(np.int32)
    return d, q


def q2_k(x):
    """Q2_K (84 B): scales[16] (sc | m << 4), qs[64], f16 d, f16 dmin."""
    x = x.reshape(-1, 16, 16)
    scale, mins = affine_sub(x, 3)
    d, sc = quant_scales(scale, 15)
    dmin, m = quant_scales(mins, 15)
    dl = (d[:, None] * sc)[..., None]
    ml = (dmin[:, None] * m)[..., None]
    q = np.clip(np.rint(safe_div(x + ml, dl)), 0, 3).astype(np.uint8).reshape(-1, 2, 4, 32)  # [half][shift][l]
    qs = (q[:, :, 0] | q[:, :, 1] << 2 | q[:, :, 2] << 4 | q[:, :, 3] << 6).reshape(-1, 64)
    scales = (sc | m << 4).astype(np.uint8)
    return np.concatenate([scales, qs, f16_bytes(d), f16_bytes(dmin)], axis=1)


def q3_k(x):
    """Q3_K (110 B): hmask[32], qs[64], scales[12] (6-bit signed, +32), f16 d."""
    x = x.reshape(-1, 16, 16)
    i = np.abs(x).argmax(axis=-1)
    scale = -np.take_along_axis(x, i[..., None], axis=-1)[..., 0] / 4  # the largest value maps to -4
    d = f16_round(np.abs(scale).max(axis=-1) / 31)
    sc = np.clip(np.rint(safe_div(scale, d[:, None])), -32, 31).astype(np.int32)
    q = np.clip(np.rint(safe_div(x, (d[:, None] * sc)[..., None])), -4, 3).astype(np.int32) + 4
    q = q.reshape(-1, 2, 4, 32).astype(np.uint8)  # [half][shift][l]
    low = q & 3
    qs = (low[:, :, 0] | low[:, :, 1] << 2 | low[:, :, 2] << 4 | low[:, :, 3] << 6).reshape(-1, 64)
    hb = (q >> 2).reshape(-1, 8, 32)  # bit 4*half + shift of hmask[l]
    hmask = np.zeros((x.shape[0], 32), np.uint8)
    for b in range(8):
        hmask |= hb[:, b] << b
    u = (sc + 32).astype(np.uint8)  # (nb, 16)
    scales = np.zeros((x.shape[0], 12), np.uint8)
    for s in range(16):
        lo = u[:, s] & 0xF
        scales[:, s % 8] |= lo if s < 8 else lo << 4
        scales[:, 8 + s % 4] |= (u[:, s] >> 4) << (2 * (s // 4))
    return np.concatenate([hmask, qs, scales, f16_bytes(d)], axis=1)


def k4_pack_scales(sc, m):
    """Q4_K/Q5_K: 8 6-bit scales and mins -> 12 bytes."""
    out = np.zeros((sc.shape[0], 12), np.uint8)
    sc = sc.astype(np.uint8)
    m = m.astype(np.uint8)
    for j in range(8):
        if j < 4:
            out[:, j] |= sc[:, j] & 63
            out[:, j + 4] |= m[:, j] & 63
        else:
            out[:, j + 4] |= (sc[:, j] & 0xF) | (m[:, j] & 0xF) << 4
            out[:, j - 4] |= (sc[:, j] >> 4) << 6
            out[:, j] |= (m[:, j] >> 4) << 6
    return out


def q45_k(x, bits):
    """Q4_K (144 B) / Q5_K (176 B): f16 d, f16 dmin, scales[12], [qh[32]], qs[128]."""
    x = x.reshape(-1, 8, 32)
    nlev = (1 << bits) - 1
    scale, mins = affine_sub(x, nlev)
    d, sc = quant_scales(scale, 63)
    dmin, m = quant_scales(mins, 63)
    dl = (d[:, None] * sc)[..., None]
    ml = (dmin[:, None] * m)[..., None]
    q = np.clip(np.rint(safe_div(x + ml, dl)), 0, nlev).astype(np.uint8)  # (nb, 8, 32)
    lo = q & 0xF
    qs = (lo[:, 0::2] | lo[:, 1::2] << 4).reshape(-1, 128)
    parts = [f16_bytes(d), f16_bytes(dmin), k4_pack_scales(sc, m)]
    if bits == 5:
        qh = np.zeros((x.shape[0], 32), np.uint8)
        for j in range(8):
            qh |= (q[:, j] >> 4) << j
        parts.append(qh)
    return np.concatenate(parts + [qs], axis=1)


def q6_k(x):
    """Q6_K (210 B): ql[128], qh[64], int8 scales[16], f16 d."""
    x = x.reshape(-1, 16, 16)
    i = np.abs(x).argmax(axis=-1)
    scale = -np.take_along_axis(x, i[..., None], axis=-1)[..., 0] / 32
    d = f16_round(np.abs(scale).max(axis=-1) / 127)
    sc = np.clip(np.rint(safe_div(scale, d[:, None])), -128, 127).astype(np.int32)
    q = np.clip(np.rint(safe_div(x, (d[:, None] * sc)[..., None])), -32, 31).astype(np.int32) + 32
    q = q.astype(np.uint8).reshape(-1, 2, 4, 32)  # [half][chunk c][l]: value 128h + 32c + l
    lo = q & 0xF
    ql = np.concatenate([lo[:, :, 0] | lo[:, :, 2] << 4, lo[:, :, 1] | lo[:, :, 3] << 4], axis=2).reshape(-1, 128)
    hi = q >> 4
    qh = (hi[:, :, 0] | hi[:, :, 1] << 2 | hi[:, :, 2] << 4 | hi[:, :, 3] << 6).reshape(-1, 64)
    scales = sc.astype(np.int8).view(np.uint8)
    return np.concatenate([ql, qh, scales, f16_bytes(d)], axis=1)


KQUANT = {"Q2_K": q2_k, "Q3_K": q3_k, "Q4_K": lambda x: q45_k(x, 4), "Q5_K": lambda x: q45_k(x, 5), "Q6_K": q6_k}


def quantize(a, tname):
    """2-D float32 array (rows, ne0) -> bytes array in the type's row layout."""
    if tname in KQUANT:
        blocks = KQUANT[tname](np.ascontiguousarray(a, dtype=np.float32).reshape(-1, 256))
        return blocks.reshape(a.shape[0], -1)
    return gguf.quants.quantize(a.astype(np.float32), QT[tname])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("type", choices=TYPES)
    args = ap.parse_args()

    r = gguf.GGUFReader(args.input)
    arch = r.fields[gguf.Keys.General.ARCHITECTURE].contents()
    w = gguf.GGUFWriter(args.output, arch)
    for f in r.fields.values():
        if f.name == gguf.Keys.General.ARCHITECTURE or f.name.startswith("GGUF."):
            continue
        sub = f.types[-1] if f.types[0] == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(f.name, f.contents(), f.types[0], sub_type=sub)

    out = []
    for t in r.tensors:
        a = np.array(t.data)
        if t.tensor_type != QT.F32:
            sys.exit(f"{t.name}: input must be F32, is {t.tensor_type.name}")
        tname = args.type
        if a.ndim == 2:
            if tname in FALLBACK and a.shape[1] % 256:
                print(f"{t.name} {list(a.shape)}: ne0 {a.shape[1]} % 256 != 0, {FALLBACK[tname]} instead of {tname}")
                tname = FALLBACK[tname]
            data = quantize(a, tname)
            deq = gguf.quants.dequantize(data, QT[tname]).reshape(a.shape)
            err = np.linalg.norm(deq - a) / max(np.linalg.norm(a), 1e-30)
            print(f"{t.name} {list(a.shape)} -> {tname} rel_l2 {err:.4f}")
            w.add_tensor(t.name, data, raw_dtype=QT[tname])
        else:
            w.add_tensor(t.name, a)
        out.append(t.name)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
