#!/usr/bin/env python3
"""Write synthetic GGUF benchmark models: real architectures' shapes, random weights.

    tools/make_bench_models.py OUTDIR [--only NAME ...] [--force] [--list]

Every file has the metadata keys and tensor names a converted model of that
architecture has (llama / qwen2 / qwen3 / gemma3), a small SentencePiece-style ("llama") vocabulary
of the right size so llama.cpp accepts it, F32 norms near 1 and random quantized
weights. The quant blocks are written directly as random bytes with finite f16 scales
chosen so each weight has a standard deviation of about 0.5/sqrt(K); the numbers are
meaningless but keep activations finite, which is all a speed benchmark needs.

Default set (about 6 GB): llama-3.2-1b-{q4_0,q8_0,q4_k,f16,q4_k_m,q6_k},
qwen3-0.6b-{q8_0,q4_0,q4_k_m}. The llama-3-8b-{q4_0,q8_0,q4_k_m,q6_k,f16} files (GPU
benchmarks, 4.7 / 8.5 / 5.0 / 6.6 / 16 GB) and every {q5_k_m,q3_k_s,q2_k,bf16} file only
with --only. q4_k_m and q5_k_m mix Q4_K / Q5_K with Q6_K as llama.cpp's Q4_K_M and Q5_K_M
do, q2_k mixes Q2_K with Q3_K as its Q2_K does; q3_k_s is Q3_K throughout; the
quantized files keep token_embd / output in Q6_K. gemma-3-270m-q4_k_m (only with
--only) has the real Gemma 3 270M Q4_K_M file's types: rows of 640 values fall back from
Q4_K / Q6_K to Q5_0 / Q8_0 as llama.cpp's quantizer does, token_embd is Q8_0;
gemma-3-4b-q4_k_m (only with --only) is Gemma 3 4B's shape; qwen2.5-0.5b-q4_k_m (only
with --only) is the default real model's (Qwen2.5-Coder-0.5B-Instruct Q4_K_M) shape and
types the same way: QKV biases, rows of 896, so mostly Q5_0; token_embd Q5_0, output Q8_0.
The legacy types (q4_1, q5_0, q5_1; only with --only) keep token_embd / output in Q6_K.
NAME-mlxB (B = 2, 3, 4, 6, 8; only with --only) is an MLX checkpoint directory
(config.json, model.safetensors; llama and qwen3 shapes) with every matrix, the
embeddings too, B-bit affine in groups of 64 with f16 scales and biases, as mlx-lm
converts by default.
Existing files are kept unless --force.
"""
import argparse
import json
import math
import os
import shutil
import sys
import time

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_mlx import hf_name, write_safetensors  # noqa: E402

SHAPES = {
    "llama-3.2-1b": dict(arch="llama", dim=2048, layers=16, heads=32, kv=8, head_dim=64, ffn=8192,
                         vocab=128256, rope=500000.0, eps=1e-5, ctx=131072, tied=True, qk_norm=False),
    "qwen3-0.6b": dict(arch="qwen3", dim=1024, layers=28, heads=16, kv=8, head_dim=128, ffn=3072,
                       vocab=151936, rope=1000000.0, eps=1e-6, ctx=40960, tied=True, qk_norm=True),
    "llama-3-8b": dict(arch="llama", dim=4096, layers=32, heads=32, kv=8, head_dim=128, ffn=14336,
                       vocab=128256, rope=500000.0, eps=1e-5, ctx=8192, tied=False, qk_norm=False),
    # the default real model's shape (scripts/get-model qwen-coder): QKV biases, rows of 896,
    # an output matrix of its own (the file has one)
    "qwen2.5-0.5b": dict(arch="qwen2", dim=896, layers=24, heads=14, kv=2, head_dim=64, ffn=4864,
                         vocab=151936, rope=1000000.0, eps=1e-6, ctx=32768, tied=False, qk_norm=False,
                         qkv_bias=True),
    # post-norms (each branch normalised before its residual add), 5 of 6 layers sliding
    "gemma-3-270m": dict(arch="gemma3", dim=640, layers=18, heads=4, kv=1, head_dim=256, ffn=2048,
                         vocab=262144, rope=1000000.0, eps=1e-6, ctx=32768, tied=True, qk_norm=True,
                         post_norms=True, sliding_window=512),
    # a larger Gemma 3: 8 heads of 256 on 4 KV heads, a window of 1024
    "gemma-3-4b": dict(arch="gemma3", dim=2560, layers=34, heads=8, kv=4, head_dim=256, ffn=10240,
                       vocab=262144, rope=1000000.0, eps=1e-6, ctx=131072, tied=True, qk_norm=True,
                       post_norms=True, sliding_window=1024),
}

# name -> (shape, weight type, type of token_embd/output (or a pair), general.file_type); weight types
# "q4_k_m", "q5_k_m" and "q2_k" are mixes as llama.cpp's files of those names (mixed_type)
MODELS = {
    "llama-3.2-1b-q4_0": ("llama-3.2-1b", QT.Q4_0, QT.Q4_0, 2),
    "llama-3.2-1b-q8_0": ("llama-3.2-1b", QT.Q8_0, QT.Q8_0, 7),
    "llama-3.2-1b-q4_k": ("llama-3.2-1b", QT.Q4_K, QT.Q6_K, 15),   # like Q4_K_M: embeddings Q6_K
    "llama-3.2-1b-f16": ("llama-3.2-1b", QT.F16, QT.F16, 1),
    "qwen3-0.6b-q8_0": ("qwen3-0.6b", QT.Q8_0, QT.Q8_0, 7),
    "qwen3-0.6b-q4_0": ("qwen3-0.6b", QT.Q4_0, QT.Q4_0, 2),
    "llama-3-8b-q4_0": ("llama-3-8b", QT.Q4_0, QT.Q4_0, 2),
    "llama-3-8b-q8_0": ("llama-3-8b", QT.Q8_0, QT.Q8_0, 7),
    "llama-3.2-1b-q4_k_m": ("llama-3.2-1b", "q4_k_m", QT.Q6_K, 15),
    "llama-3.2-1b-q6_k": ("llama-3.2-1b", QT.Q6_K, QT.Q6_K, 18),
    "qwen3-0.6b-q4_k_m": ("qwen3-0.6b", "q4_k_m", QT.Q6_K, 15),
    "llama-3-8b-q4_k_m": ("llama-3-8b", "q4_k_m", QT.Q6_K, 15),
    "llama-3-8b-q6_k": ("llama-3-8b", QT.Q6_K, QT.Q6_K, 18),
    "llama-3-8b-f16": ("llama-3-8b", QT.F16, QT.F16, 1),
    # as the real Gemma 3 270M Q4_K_M file (scripts/get-model): rows of 640 fall back to Q5_0 / Q8_0
    # as the real Qwen2.5-Coder-0.5B Q4_K_M file: rows of 896 too (133 of 170 matrices Q5_0),
    # token_embd Q5_0 and output Q8_0
    "qwen2.5-0.5b-q4_k_m": ("qwen2.5-0.5b", "q4_k_m", (QT.Q5_0, QT.Q8_0), 15),
    "gemma-3-270m-q4_k_m": ("gemma-3-270m", "q4_k_m", QT.Q8_0, 15),
    "gemma-3-4b-q4_k_m": ("gemma-3-4b", "q4_k_m", QT.Q6_K, 15),
}
# (weight type, token_embd/output, file type), only with --only; the legacy types keep
# token_embd / output in Q6_K as llama.cpp's quantizer does
MORE = {"q5_k_m": ("q5_k_m", QT.Q6_K, 17), "q3_k_s": (QT.Q3_K, QT.Q6_K, 11), "q2_k": ("q2_k", QT.Q6_K, 10),
        "bf16": (QT.BF16, QT.BF16, 32), "q4_1": (QT.Q4_1, QT.Q6_K, 3), "q5_0": (QT.Q5_0, QT.Q6_K, 8),
        "q5_1": (QT.Q5_1, QT.Q6_K, 9)}
# MLX affine checkpoints (a directory: config.json, model.safetensors), only with --only:
# every matrix, the embeddings too, quantized with groups of 64 and f16 scales and biases,
# as mlx-lm's convert does by default
MLX_BITS = (2, 3, 4, 6, 8)
SHAPES3 = ("llama-3.2-1b", "llama-3-8b", "qwen3-0.6b")
for shape in SHAPES3:
    for t, (wt, et, ft) in MORE.items():
        MODELS["%s-%s" % (shape, t)] = (shape, wt, et, ft)
    for b in MLX_BITS:
        MODELS["%s-mlx%d" % (shape, b)] = (shape, "mlx", b, None)
DEFAULT = [n for n in MODELS if not n.startswith(("llama-3-8b", "gemma", "qwen2.5")) and n.rsplit("-", 1)[1] not in MORE
           and MODELS[n][1] != "mlx"]
MLX_GROUP = 64

# (elements per block, bytes per block)
BLOCK = {QT.Q4_0: (32, 18), QT.Q4_1: (32, 20), QT.Q5_0: (32, 22), QT.Q5_1: (32, 24), QT.Q8_0: (32, 34), QT.Q4_K: (256, 144), QT.Q6_K: (256, 210), QT.F16: (1, 2),
         QT.Q5_K: (256, 176), QT.Q3_K: (256, 110), QT.Q2_K: (256, 84), QT.BF16: (1, 2)}


class Gen:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def raw(self, nbytes):
        """nbytes of random, writable uint8 (fast: 64-bit raw draws)."""
        words = self.rng.bit_generator.random_raw((nbytes + 7) // 8)
        return words.view(np.uint8)[:nbytes]

    def scales(self, n, mean):
        """n finite f16 scales in [0.5, 1.5) * mean, as bytes (n, 2)."""
        s = (self.rng.random(n, dtype=np.float32) + np.float32(0.5)) * np.float32(mean)
        return s.astype(np.float16).view(np.uint8).reshape(n, 2)

    def weight(self, qt, rows, cols):
        """Random data for a [rows][cols] matrix (cols = K, the reduction dim)."""
        w_std = 0.5 / math.sqrt(cols)
        per, size = BLOCK[qt]
        assert cols % per == 0, (qt, cols)
        nb = rows * cols // per
        b = self.raw(nb * size).reshape(nb, size)
        if qt == QT.Q4_0:      # d*(q-8), q in 0..15: std 4.6 d
            b[:, 0:2] = self.scales(nb, w_std / 4.6)
        elif qt == QT.Q4_1:    # d*q + m, q in 0..15, m = -7.5 d
            d = self.scales(nb, w_std / 4.6)
            b[:, 0:2] = d
            b[:, 2:4] = (d.view(np.float16) * np.float16(-7.5)).view(np.uint8)
        elif qt == QT.Q5_0:    # d*(q-16), q in 0..31: std 9.2 d
            b[:, 0:2] = self.scales(nb, w_std / 9.2)
        elif qt == QT.Q5_1:    # d*q + m, q in 0..31, m = -15.5 d
            d = self.scales(nb, w_std / 9.2)
            b[:, 0:2] = d
            b[:, 2:4] = (d.view(np.float16) * np.float16(-15.5)).view(np.uint8)
        elif qt == QT.Q8_0:    # d*q, q int8: std 74 d
            b[:, 0:2] = self.scales(nb, w_std / 74.0)
        elif qt == QT.Q4_K:    # d*s*q - dmin*m; all 8 sub-block scales s = m = 8, dmin = 7.5 d
            s = 8
            d = self.scales(nb, w_std / 4.6 / s)
            b[:, 0:2] = d
            b[:, 2:4] = (d.view(np.float16) * np.float16(7.5)).view(np.uint8)
            b[:, 4:12] = s                  # 6-bit scales/mins of sub-blocks 0..3
            b[:, 12:16] = s | (s << 4)      # low nibbles of sub-blocks 4..7 (high bits 0)
        elif qt == QT.Q5_K:    # as Q4_K with a fifth bit (q 0..31: std 9.2), dmin = 15.5 d
            s = 8
            d = self.scales(nb, w_std / 9.2 / s)
            b[:, 0:2] = d
            b[:, 2:4] = (d.view(np.float16) * np.float16(15.5)).view(np.uint8)
            b[:, 4:12] = s
            b[:, 12:16] = s | (s << 4)
        elif qt == QT.Q3_K:    # d*sc*(q-4), q 3-bit: std 2.3; the 16 6-bit scales 40 (sc = 8); d is last
            b[:, 96:104] = 0x88             # low nibbles
            b[:, 104:108] = 0xAA            # high two bits (2) of four scales a byte
            b[:, 108:110] = self.scales(nb, w_std / 2.3 / 8)
        elif qt == QT.Q2_K:    # d*sc*q - dmin*m, q 0..3: std 1.12; sc = m = 8, dmin = 1.5 d
            b[:, 0:16] = 0x88
            d = self.scales(nb, w_std / 1.12 / 8)
            b[:, 80:82] = d
            b[:, 82:84] = (d.view(np.float16) * np.float16(1.5)).view(np.uint8)
        elif qt == QT.Q6_K:    # d*sc*(q-32), q 6-bit: std 18.5; int8 sc = 16; d is last
            b[:, 192:208] = 16
            b[:, 208:210] = self.scales(nb, w_std / 18.5 / 16)
        elif qt == QT.BF16:    # as F16, in bfloat16's fields
            e = int(math.floor(math.log2(w_std / 1.5)))
            h = b.reshape(-1).view(np.uint16)
            h &= 0x807F
            h |= (e + 127) << 7
            return b.reshape(rows, cols * 2)
        elif qt == QT.F16:     # random sign, magnitude in [2^e, 2^(e+1))
            e = int(math.floor(math.log2(w_std / 1.5)))
            h = b.reshape(-1).view(np.uint16)
            h &= 0x83FF
            h |= (e + 15) << 10
            return h.reshape(rows, cols).view(np.float16)
        return b.reshape(rows, nb // rows * size)

    def norm(self, n):
        return (1.0 + 0.02 * self.rng.standard_normal(n)).astype(np.float32)


def vocab(n):
    """SentencePiece-style vocabulary: <unk> <s> </s>, the 256 byte tokens, fillers."""
    toks = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % i for i in range(256)]
    types = [2, 3, 3] + [6] * 256
    toks += ["\u2581t%d" % i for i in range(n - len(toks))]
    types += [1] * (n - len(types))
    scores = np.zeros(n, dtype=np.float32)
    scores[259:] = -np.arange(n - 259, dtype=np.float32)
    return toks, scores, types


def mixed_type(wt, tensor, layer, layers):
    """The type of a layer's matrix: wt, or for "q4_k_m" / "q5_k_m" Q6_K in attn_v and
    ffn_down of the first and last eighth of the layers and every third one between, Q4_K /
    Q5_K elsewhere (llama.cpp's Q4_K_M and Q5_K_M choice); for "q2_k" Q3_K in attn_v and
    ffn_down, Q2_K elsewhere (its Q2_K)."""
    if wt == "q2_k":
        return QT.Q3_K if tensor in ("attn_v", "ffn_down") else QT.Q2_K
    if wt not in ("q4_k_m", "q5_k_m"):
        return wt
    more = layer < layers // 8 or layer >= 7 * layers // 8 or (layer - layers // 8) % 3 == 2
    return QT.Q6_K if tensor in ("attn_v", "ffn_down") and more else QT.Q4_K if wt == "q4_k_m" else QT.Q5_K


# llama.cpp's fallback where a row is not whole 256-value super-blocks
FALLBACK = {QT.Q4_K: QT.Q5_0, QT.Q6_K: QT.Q8_0}


def tensor_list(c, wt, et):
    """[(name, kind, type, rows, cols)]; kind 'w' (matrix) or 'n' (norm, cols elements)."""
    d, hd, ff = c["dim"], c["head_dim"], c["ffn"]
    L = c["layers"]
    nq, nkv = c["heads"] * hd, c["kv"] * hd
    et, ot = et if isinstance(et, tuple) else (et, et)
    t = [("token_embd.weight", "w", et, c["vocab"], d)]
    for l in range(c["layers"]):
        p = "blk.%d." % l
        def m(tensor, cols):
            qt = mixed_type(wt, tensor, l, L)
            return FALLBACK.get(qt, qt) if cols % 256 else qt
        t += [(p + "attn_norm.weight", "n", QT.F32, 1, d),
              (p + "attn_q.weight", "w", m("attn_q", d), nq, d),
              (p + "attn_k.weight", "w", m("attn_k", d), nkv, d),
              (p + "attn_v.weight", "w", m("attn_v", d), nkv, d),
              (p + "attn_output.weight", "w", m("attn_output", nq), d, nq)]
        if c.get("qkv_bias"):
            t += [(p + "attn_q.bias", "n", QT.F32, 1, nq), (p + "attn_k.bias", "n", QT.F32, 1, nkv),
                  (p + "attn_v.bias", "n", QT.F32, 1, nkv)]
        if c["qk_norm"]:
            t += [(p + "attn_q_norm.weight", "n", QT.F32, 1, hd),
                  (p + "attn_k_norm.weight", "n", QT.F32, 1, hd)]
        if c.get("post_norms"):
            t.append((p + "post_attention_norm.weight", "n", QT.F32, 1, d))
        t += [(p + "ffn_norm.weight", "n", QT.F32, 1, d),
              (p + "ffn_gate.weight", "w", m("ffn_gate", d), ff, d),
              (p + "ffn_up.weight", "w", m("ffn_up", d), ff, d),
              (p + "ffn_down.weight", "w", m("ffn_down", ff), d, ff)]
        if c.get("post_norms"):
            t.append((p + "post_ffw_norm.weight", "n", QT.F32, 1, d))
    t.append(("output_norm.weight", "n", QT.F32, 1, d))
    if not c["tied"]:
        t.append(("output.weight", "w", ot, c["vocab"], d))
    return t


def nbytes(qt, rows, cols):
    if qt == QT.F32:
        return rows * cols * 4
    per, size = BLOCK[qt]
    return rows * cols // per * size


def make(name, path, seed):
    shape, wt, et, ftype = MODELS[name]
    c = SHAPES[shape]
    a = c["arch"]
    w = gguf.GGUFWriter(path + ".tmp", a)
    w.add_string("general.type", "model")
    w.add_string("general.name", "synthetic " + name)
    w.add_uint32("general.file_type", ftype)
    w.add_uint32("general.quantization_version", 2)
    w.add_uint32(a + ".block_count", c["layers"])
    w.add_uint32(a + ".context_length", c["ctx"])
    w.add_uint32(a + ".embedding_length", c["dim"])
    w.add_uint32(a + ".feed_forward_length", c["ffn"])
    w.add_uint32(a + ".attention.head_count", c["heads"])
    w.add_uint32(a + ".attention.head_count_kv", c["kv"])
    w.add_float32(a + ".rope.freq_base", c["rope"])
    w.add_float32(a + ".attention.layer_norm_rms_epsilon", c["eps"])
    w.add_uint32(a + ".attention.key_length", c["head_dim"])
    w.add_uint32(a + ".attention.value_length", c["head_dim"])
    w.add_uint32(a + ".rope.dimension_count", c["head_dim"])
    w.add_uint32(a + ".vocab_size", c["vocab"])
    if "sliding_window" in c:
        w.add_uint32(a + ".attention.sliding_window", c["sliding_window"])
    toks, scores, types = vocab(c["vocab"])
    w.add_string("tokenizer.ggml.model", "llama")
    w.add_string("tokenizer.ggml.pre", "default")
    w.add_array("tokenizer.ggml.tokens", toks)
    w.add_array("tokenizer.ggml.scores", scores.tolist())
    w.add_array("tokenizer.ggml.token_type", types)
    w.add_uint32("tokenizer.ggml.bos_token_id", 1)
    w.add_uint32("tokenizer.ggml.eos_token_id", 2)
    w.add_uint32("tokenizer.ggml.unknown_token_id", 0)
    w.add_bool("tokenizer.ggml.add_bos_token", True)
    w.add_bool("tokenizer.ggml.add_eos_token", False)

    tl = tensor_list(c, wt, et)
    for tn, kind, qt, rows, cols in tl:
        if qt == QT.F32:
            w.add_tensor_info(tn, (cols,), np.dtype(np.float32), nbytes(qt, rows, cols))
        elif qt == QT.F16:
            w.add_tensor_info(tn, (rows, cols), np.dtype(np.float16), nbytes(qt, rows, cols))
        else:
            nb = nbytes(qt, rows, cols)
            w.add_tensor_info(tn, (rows, nb // rows), np.dtype(np.uint8), nb, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    g = Gen(seed)
    for tn, kind, qt, rows, cols in tl:
        w.write_tensor_data(g.norm(cols) if kind == "n" else g.weight(qt, rows, cols))
    w.close()
    os.replace(path + ".tmp", path)


def make_mlx(name, path, seed):
    """An MLX checkpoint directory: HF tensor names (tools/make_mlx.py), random codes with
    f16 scales such that each weight has a standard deviation of about 0.5/sqrt(K) and
    biases centring the codes."""
    shape, _, bits, _ = MODELS[name]
    c = SHAPES[shape]
    assert c["arch"] in ("llama", "qwen3"), shape
    g = Gen(seed)
    q = {"group_size": MLX_GROUP, "bits": bits, "mode": "affine"}
    cfg = {"architectures": ["LlamaForCausalLM" if c["arch"] == "llama" else "Qwen3ForCausalLM"],
           "model_type": c["arch"], "hidden_size": c["dim"], "num_hidden_layers": c["layers"],
           "num_attention_heads": c["heads"], "num_key_value_heads": c["kv"], "head_dim": c["head_dim"],
           "intermediate_size": c["ffn"], "rms_norm_eps": c["eps"], "rope_theta": c["rope"],
           "max_position_embeddings": c["ctx"], "hidden_act": "silu", "vocab_size": c["vocab"],
           "tie_word_embeddings": c["tied"], "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float16",
           "quantization": q, "quantization_config": q}
    levels = 2 ** bits
    q_std = levels / math.sqrt(12.0)   # of codes uniform on 0..levels-1
    out = []
    for tn, kind, _, rows, cols in tensor_list(c, QT.F16, QT.F16):
        hn = hf_name(tn)
        if kind == "n":
            out.append((hn, g.norm(cols).astype(np.float16), "F16"))
            continue
        module = hn[: -len(".weight")]
        words = g.raw(rows * cols * bits // 8).view("<u4").reshape(rows, cols * bits // 32)
        sc = g.scales(rows * cols // MLX_GROUP, 0.5 / math.sqrt(cols) / q_std).view(np.float16)
        bias = sc * np.float16(-(levels - 1) / 2.0)
        out += [(hn, words, "U32"), (module + ".scales", sc.reshape(rows, -1), "F16"),
                (module + ".biases", bias.reshape(rows, -1), "F16")]
    tmp = path + ".tmp"
    os.makedirs(tmp, exist_ok=True)
    with open(os.path.join(tmp, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    write_safetensors(os.path.join(tmp, "model.safetensors"), out, {"format": "mlx"})
    if os.path.exists(path):
        shutil.rmtree(path)
    os.replace(tmp, path)


def size(path):
    if not os.path.isdir(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="models to write (default: %s)" % " ".join(DEFAULT))
    ap.add_argument("--force", action="store_true", help="rewrite files that exist")
    ap.add_argument("--list", action="store_true", help="list the model names and exit")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.list:
        for n in MODELS:
            print(n + ("" if n in DEFAULT else "   (only with --only)"))
        return 0
    names = args.only or DEFAULT
    bad = [n for n in names if n not in MODELS]
    if bad:
        sys.exit("unknown model(s): %s; known: %s" % (" ".join(bad), " ".join(MODELS)))
    os.makedirs(args.outdir, exist_ok=True)
    for i, n in enumerate(names):
        mlx = MODELS[n][1] == "mlx"
        path = os.path.join(args.outdir, "bench-%s%s" % (n, "" if mlx else ".gguf"))
        if os.path.exists(path) and not args.force:
            print("%s: exists" % path)
            continue
        t0 = time.time()
        (make_mlx if mlx else make)(n, path, args.seed + i)
        print("%s: %.2f GB in %.1f s" % (path, size(path) / 1e9, time.time() - t0), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
