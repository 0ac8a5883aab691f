#!/usr/bin/env python3
"""A tiny random nomic-bert GGUF and its hidden states from an independent NumPy forward
pass, for tests/model/test_nomic.c (no nomic-bert fixture exists: Hugging Face runs the
architecture only through remote code).

    tools/make_nomic.py OUT_DIR     -> OUT_DIR/nomic.gguf, ids.txt, hidden.f32

The architecture as GGUF describes it: token + token-type embeddings, LayerNorm; per
layer a fused QKV matrix, rotary embeddings (NeoX halves, base from rope.freq_base),
non-causal softmax attention, output projection, residual + LayerNorm, SwiGLU FFN
(silu(gate) * up, then down), residual + LayerNorm; mean pooling."""
import os
import sys

import numpy as np
import gguf

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(7)
V, D, H, L, F, T, base, eps = 300, 64, 4, 2, 96, 40, 1000.0, 1e-12
hd = D // H


def mat(n_out, n_in, s=None):
    return (rng.standard_normal((n_out, n_in)) * (s or 1 / np.sqrt(n_in))).astype(np.float32)


def vec(n, mean=0.0, s=0.1):
    return (mean + rng.standard_normal(n) * s).astype(np.float32)


W = {"tok": mat(V, D, 0.5), "types": mat(2, D, 0.1), "en_w": vec(D, 1), "en_b": vec(D)}
for l in range(L):
    W[f"qkv{l}"] = mat(3 * D, D)
    W[f"o{l}"] = mat(D, D)
    W[f"an_w{l}"], W[f"an_b{l}"] = vec(D, 1), vec(D)
    W[f"up{l}"], W[f"gate{l}"], W[f"down{l}"] = mat(F, D), mat(F, D), mat(D, F)
    W[f"on_w{l}"], W[f"on_b{l}"] = vec(D, 1), vec(D)

ids = rng.integers(5, V, T)
ids[0], ids[-1] = 2, 3


def ln(x, w, b):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * w + b


def rope(x):  # x: [T, H, hd], NeoX: rotate halves
    inv = 1.0 / base ** (np.arange(0, hd, 2, dtype=np.float64) / hd)
    ang = np.arange(T)[:, None] * inv[None, :]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    a, b = x[..., : hd // 2], x[..., hd // 2:]
    return np.concatenate([a * c - b * s, a * s + b * c], -1)


x = W["tok"][ids].astype(np.float64) + W["types"][0]
x = ln(x, W["en_w"], W["en_b"])
for l in range(L):
    qkv = x @ W[f"qkv{l}"].T
    q, k, v = (qkv[:, i * D:(i + 1) * D].reshape(T, H, hd) for i in range(3))
    q, k = rope(q), rope(k)
    s = np.einsum("thd,shd->hts", q, k) / np.sqrt(hd)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    a = np.einsum("hts,shd->thd", p, v).reshape(T, D)
    x = ln(x + a @ W[f"o{l}"].T, W[f"an_w{l}"], W[f"an_b{l}"])
    g, u = x @ W[f"gate{l}"].T, x @ W[f"up{l}"].T
    f = (g / (1 + np.exp(-g)) * u) @ W[f"down{l}"].T
    x = ln(x + f, W[f"on_w{l}"], W[f"on_b{l}"])

w = gguf.GGUFWriter(os.path.join(out, "nomic.gguf"), "nomic-bert")
w.add_context_length(128)
w.add_embedding_length(D)
w.add_feed_forward_length(F)
w.add_block_count(L)
w.add_head_count(H)
w.add_layer_norm_eps(eps)
w.add_causal_attention(False)
w.add_pooling_type(gguf.PoolingType.MEAN)
w.add_rope_freq_base(base)
w.add_tokenizer_model("bert")
w.add_token_list(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"\u2581w{i}" for i in range(5, V)])
w.add_token_types([3] * 5 + [1] * (V - 5))
w.add_tensor("token_embd.weight", W["tok"])
w.add_tensor("token_types.weight", W["types"])
w.add_tensor("token_embd_norm.weight", W["en_w"])
w.add_tensor("token_embd_norm.bias", W["en_b"])
for l in range(L):
    w.add_tensor(f"blk.{l}.attn_qkv.weight", W[f"qkv{l}"])
    w.add_tensor(f"blk.{l}.attn_output.weight", W[f"o{l}"])
    w.add_tensor(f"blk.{l}.attn_output_norm.weight", W[f"an_w{l}"])
    w.add_tensor(f"blk.{l}.attn_output_norm.bias", W[f"an_b{l}"])
    w.add_tensor(f"blk.{l}.ffn_up.weight", W[f"up{l}"])
    w.add_tensor(f"blk.{l}.ffn_gate.weight", W[f"gate{l}"])
    w.add_tensor(f"blk.{l}.ffn_down.weight", W[f"down{l}"])
    w.add_tensor(f"blk.{l}.layer_output_norm.weight", W[f"on_w{l}"])
    w.add_tensor(f"blk.{l}.layer_output_norm.bias", W[f"on_b{l}"])
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
open(os.path.join(out, "ids.txt"), "w").write(",".join(map(str, ids)) + "\n")
x.astype("<f4").tofile(os.path.join(out, "hidden.f32"))
print("nomic-bert:", T, "tokens, dim", D)
