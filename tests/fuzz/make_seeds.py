#!/usr/bin/env python3
"""Writes the seed corpora of the libFuzzer targets into tests/fuzz/corpus/<target>/.

    tests/fuzz/make_seeds.py [CORPUS_DIR]

fuzz_gguf: tiny GGUF models, one per architecture the loader knows (llama with linear
and Llama 3.1 RoPE scaling, qwen2, qwen3, gemma2, gemma3, bert, nomic-bert), each with a
tokenizer (SentencePiece, byte-level BPE or WordPiece) and a chat template of a different
family, tensors of every type, every metadata type, GGUF v2 and v3.
fuzz_safetensors: one tensor of every dtype, MLX-style packed weights, edge shapes.
fuzz_json: config.json and index documents plus the corners of the grammar.
fuzz_hf: Hugging Face folders in fuzz_hf.c's input layout (config.json, the marker line,
model.safetensors, optionally the index) for llama, qwen2, qwen3 and MLX 2..8-bit.
fuzz_tokenize, fuzz_detok: text and id sequences for each vocabulary of tests/fuzz/vocabs.h
(byte 0 the vocabulary, byte 1 the flags): lines of the tokenizer corpus, special-token
text, ids around the byte tokens and the ends of each vocabulary.
fuzz_chat: conversations for every family (fuzz_chat.c's layout) and real template texts.
fuzz_server: OpenAI request bodies for each endpoint (fuzz_server.c's layout).

Standard library only, and deterministic: a rerun rewrites the same bytes. It writes
only files named seed-*, so inputs that `scripts/fuzz` merged into a corpus stay.
"""
import json
import os
import random
import struct
import sys

# ---- GGUF (github.com/ggml-org/ggml docs/gguf.md): header, metadata, tensor infos, data

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<?",
          U64: "<Q", I64: "<q", F64: "<d"}
# name: (ggml type id, values per block, bytes per block)
GGML = {"F32": (0, 1, 4), "F16": (1, 1, 2), "Q4_0": (2, 32, 18), "Q4_1": (3, 32, 20), "Q5_0": (6, 32, 22),
        "Q5_1": (7, 32, 24), "Q8_0": (8, 32, 34), "Q2_K": (10, 256, 84), "Q3_K": (11, 256, 110),
        "Q4_K": (12, 256, 144), "Q5_K": (13, 256, 176), "Q6_K": (14, 256, 210), "BF16": (30, 1, 2)}

rng = random.Random(1234)


def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def gval(t, v):
    if t == STR:
        return gstr(v)
    if t == ARR:
        at, items = v
        return struct.pack("<IQ", at, len(items)) + b"".join(gval(at, x) for x in items)
    return struct.pack(SCALAR[t], v)


def floats(n, dtype, scale=0.1, value=None):
    """n values as F32/F16/BF16 bytes; random normals unless value is given."""
    xs = [value if value is not None else rng.gauss(0, scale) for _ in range(n)]
    if dtype == "F32":
        return struct.pack("<%df" % n, *xs)
    if dtype == "F16":
        return struct.pack("<%de" % n, *xs)
    if dtype == "BF16":
        return b"".join(struct.pack("<f", x)[2:] for x in xs)
    raise ValueError(dtype)


def tensor_bytes(dtype, n, value=None):
    if dtype in ("F32", "F16", "BF16"):
        return floats(n, dtype, value=value)
    _, blk, bb = GGML[dtype]
    return bytes(rng.randrange(256) for _ in range(n // blk * bb))   # the loader never decodes these


def gguf(kvs, tensors, version=3, align=32):
    """kvs: [(key, type, value)]; tensors: [(name, dtype, ne list, data bytes)]."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for k, t, v in kvs:
        out += gstr(k) + struct.pack("<I", t) + gval(t, v)
    data, offs = b"", []
    for _, _, _, d in tensors:
        data += b"\0" * (-len(data) % align)
        offs.append(len(data))
        data += d
    for (name, dtype, ne, _), off in zip(tensors, offs):
        out += gstr(name) + struct.pack("<I", len(ne)) + struct.pack("<%dQ" % len(ne), *ne)
        out += struct.pack("<IQ", GGML[dtype][0], off)
    out += b"\0" * (-len(out) % align)
    return out + data


def mat(name, ne0, ne1, dtype):
    return (name, dtype, [ne0, ne1], tensor_bytes(dtype, ne0 * ne1))


def vec(name, n, value=None):
    return (name, "F32", [n], tensor_bytes("F32", n, value))


# ---- tokenizers (token types: 1 normal, 2 unknown, 3 control, 4 user-defined, 6 byte)

def spm_vocab(extra=()):
    toks = [("<unk>", 2), ("<s>", 3), ("</s>", 3)]
    toks += [("<0x%02X>" % b, 6) for b in (0x0A, 0x20, 0x41, 0xE2, 0x96, 0x81)]
    toks += [(t, 1) for t in ("\u2581", "\u2581a", "\u2581t", "\u2581th", "\u2581the", "a", "b", "c", "e", "h",
                              "t", "th", "he", "\u2581\u2581", "\u00e9", "\u2581h\u00e9")]
    toks += [(t, 4) for t in extra]
    return [
        ("tokenizer.ggml.model", STR, "llama"),
        ("tokenizer.ggml.tokens", ARR, (STR, [t for t, _ in toks])),
        ("tokenizer.ggml.scores", ARR, (F32, [-float(i) for i in range(len(toks))])),
        ("tokenizer.ggml.token_type", ARR, (I32, [k for _, k in toks])),
        ("tokenizer.ggml.bos_token_id", U32, 1),
        ("tokenizer.ggml.eos_token_id", U32, 2),
        ("tokenizer.ggml.unknown_token_id", U32, 0),
        ("tokenizer.ggml.add_bos_token", BOOL, True),
        ("tokenizer.ggml.add_space_prefix", BOOL, True),
    ], len(toks)


def bpe_vocab(pre, specials=("<|endoftext|>", "<|im_start|>", "<|im_end|>")):
    # byte-level BPE spells a space as U+0120 and a newline as U+010A
    toks = list("abcdefghinrst.,!?'0123") + ["\u0120", "\u010a", "\u00c3", "\u00a9"]
    merges = ["\u0120 t", "t h", "h e", "\u0120t h", "\u0120th e", "i n", "\u0120 a", "e r"]
    toks += ["\u0120t", "th", "he", "\u0120th", "\u0120the", "in", "\u0120a", "er"]
    types = [1] * len(toks) + [3] * len(specials)
    toks += list(specials)
    return [
        ("tokenizer.ggml.model", STR, "gpt2"),
        ("tokenizer.ggml.pre", STR, pre),
        ("tokenizer.ggml.tokens", ARR, (STR, toks)),
        ("tokenizer.ggml.token_type", ARR, (I32, types)),
        ("tokenizer.ggml.merges", ARR, (STR, merges)),
        ("tokenizer.ggml.bos_token_id", U32, len(toks) - len(specials)),
        ("tokenizer.ggml.eos_token_id", U32, len(toks) - 1),
        ("tokenizer.ggml.add_bos_token", BOOL, False),
    ], len(toks)


def wpm_vocab():
    toks = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [chr(c) for c in range(ord("a"), ord("z") + 1)]
    toks += ["the", "hello", "world", "##s", "##ing", "##ed", ",", ".", "!", "\u00e9t\u00e9"]
    types = [3, 2, 3, 3, 3] + [1] * (len(toks) - 5)
    return [
        ("tokenizer.ggml.model", STR, "bert"),
        ("tokenizer.ggml.tokens", ARR, (STR, toks)),
        ("tokenizer.ggml.token_type", ARR, (I32, types)),
        ("tokenizer.ggml.bos_token_id", U32, 2),
        ("tokenizer.ggml.eos_token_id", U32, 3),
        ("tokenizer.ggml.unknown_token_id", U32, 1),
        ("tokenizer.ggml.padding_token_id", U32, 0),
    ], len(toks)


# Short texts carrying the markers ak_chat_detect looks for, one per family.
TEMPLATES = {
    "chatml": "{% for m in messages %}{{'<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n'}}{% endfor %}",
    "chatml-system": "{% if messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou are a tiny test model.<|im_end|>\\n' }}"
                     "{% endif %}{% for m in messages %}{{'<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n'}}{% endfor %}",
    "qwen3": "{%- set ns = namespace(last_query_index=messages|length - 1) %}<|im_start|>{{ m }}</think>",
    "llama3": "{{ '<|start_header_id|>system<|end_header_id|>\\n\\nCutting Knowledge Date: December 2023' }}<|eot_id|>",
    "gemma": "{{ '<start_of_turn>' + role + '\\n' + content | trim + '<end_of_turn>\\n' }}",
    "llama2": "{{ bos_token + '[INST] <<SYS>>\\n' + system + '\\n<</SYS>>\\n\\n' + content + ' [/INST]' }}",
    "mistral": "{{ bos_token }}{% for m in messages %}{{ '[INST] ' + m['content'] + ' [/INST]' }}{% endfor %}",
    "nemo": "{{ bos_token }}{% for m in messages %}{{ '[INST]' + m['content'] + '[/INST]' }}{% endfor %}",
}


# ---- GGUF models

def hparams(arch, dim, nl, nh, nkv, ff, ctx=64, **extra):
    kv = [("general.architecture", STR, arch),
          (arch + ".embedding_length", U32, dim), (arch + ".block_count", U32, nl),
          (arch + ".attention.head_count", U32, nh), (arch + ".attention.head_count_kv", U32, nkv),
          (arch + ".feed_forward_length", U32, ff), (arch + ".context_length", U32, ctx)]
    for k, (t, v) in extra.items():
        kv.append((arch + "." + k.replace("__", "."), t, v))
    return kv


def decoder(dim, nl, nh, nkv, ff, V, hd=None, wt="F16", et="F16", tied=False, biases=False, qk_norm=False,
            post_norms=False, rope_freqs=0):
    hd = hd or dim // nh
    nq, nk = nh * hd, nkv * hd
    ts = [mat("token_embd.weight", dim, V, et), vec("output_norm.weight", dim, 1.0)]
    if not tied:
        ts.append(mat("output.weight", dim, V, et))
    if rope_freqs:
        ts.append(vec("rope_freqs.weight", rope_freqs, 2.0))
    wts = wt if isinstance(wt, list) else [wt]
    for l in range(nl):
        p = "blk.%d." % l
        w = lambda i: wts[(l + i) % len(wts)]
        ts += [vec(p + "attn_norm.weight", dim, 1.0), mat(p + "attn_q.weight", dim, nq, w(0)),
               mat(p + "attn_k.weight", dim, nk, w(1)), mat(p + "attn_v.weight", dim, nk, w(2)),
               mat(p + "attn_output.weight", nq, dim, w(3)), vec(p + "ffn_norm.weight", dim, 1.0),
               mat(p + "ffn_gate.weight", dim, ff, w(4)), mat(p + "ffn_up.weight", dim, ff, w(5)),
               mat(p + "ffn_down.weight", ff, dim, w(6))]
        if biases:
            ts += [vec(p + "attn_q.bias", nq), vec(p + "attn_k.bias", nk), vec(p + "attn_v.bias", nk),
                   vec(p + "attn_output.bias", dim)]
        if qk_norm:
            ts += [vec(p + "attn_q_norm.weight", hd, 1.0), vec(p + "attn_k_norm.weight", hd, 1.0)]
        if post_norms:
            ts += [vec(p + "post_attention_norm.weight", dim, 1.0), vec(p + "post_ffw_norm.weight", dim, 1.0)]
    return ts


def encoder(dim, nl, nh, ff, V, ctx, fused=False, gated=False):
    ts = [mat("token_embd.weight", dim, V, "F16"), vec("token_embd_norm.weight", dim, 1.0),
          vec("token_embd_norm.bias", dim)]
    if not fused:
        ts += [mat("position_embd.weight", dim, ctx, "F16"), mat("token_types.weight", dim, 2, "F32")]
    for l in range(nl):
        p = "blk.%d." % l
        if fused:
            ts.append(mat(p + "attn_qkv.weight", dim, 3 * dim, "F16"))
        else:
            ts += [mat(p + "attn_q.weight", dim, dim, "F16"), vec(p + "attn_q.bias", dim),
                   mat(p + "attn_k.weight", dim, dim, "F16"), vec(p + "attn_k.bias", dim),
                   mat(p + "attn_v.weight", dim, dim, "F16"), vec(p + "attn_v.bias", dim)]
        ts += [mat(p + "attn_output.weight", dim, dim, "F16"), vec(p + "attn_output.bias", dim),
               vec(p + "attn_output_norm.weight", dim, 1.0), vec(p + "attn_output_norm.bias", dim),
               mat(p + "ffn_up.weight", dim, ff, "F16"), mat(p + "ffn_down.weight", ff, dim, "F16"),
               vec(p + "layer_output_norm.weight", dim, 1.0), vec(p + "layer_output_norm.bias", dim)]
        if gated:
            ts.append(mat(p + "ffn_gate.weight", dim, ff, "F16"))
        else:
            ts += [vec(p + "ffn_up.bias", ff), vec(p + "ffn_down.bias", dim)]
    return ts


def gguf_seeds():
    s = {}
    tok, V = spm_vocab()
    s["llama-spm"] = gguf(hparams("llama", 32, 1, 4, 2, 32, attention__layer_norm_rms_epsilon=(F32, 1e-5),
                                  rope__freq_base=(F32, 10000.0), rope__scaling__type=(STR, "linear"),
                                  rope__scaling__factor=(F32, 2.0))
                          + tok + [("tokenizer.chat_template", STR, TEMPLATES["llama2"])],
                          decoder(32, 1, 4, 2, 32, V, wt="F16", et="Q8_0"))
    tok, V = bpe_vocab("llama-bpe", ("<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"))
    s["llama31-bpe"] = gguf(hparams("llama", 32, 1, 4, 2, 32, rope__dimension_count=(U32, 8))
                            + tok + [("tokenizer.chat_template", STR, TEMPLATES["llama3"])],
                            decoder(32, 1, 4, 2, 32, V, wt=["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"], et="Q8_0",
                                    tied=True, rope_freqs=4))
    tok, V = bpe_vocab("qwen2")
    s["qwen2-bpe"] = gguf(hparams("qwen2", 32, 1, 4, 2, 32, rope__freq_base=(F32, 1e6))
                          + tok + [("tokenizer.chat_template", STR, TEMPLATES["chatml-system"])],
                          decoder(32, 1, 4, 2, 32, V, wt="BF16", et="F16", tied=True, biases=True))
    tok, V = bpe_vocab("smollm")
    s["qwen3-v2"] = gguf(hparams("qwen3", 32, 1, 4, 2, 32, attention__key_length=(U32, 16),
                                 attention__value_length=(U32, 16))
                         + tok + [("tokenizer.chat_template", STR, TEMPLATES["qwen3"])],
                         decoder(32, 1, 4, 2, 32, V, hd=16, wt="F16", et="F32", tied=True, qk_norm=True), version=2)
    tok, V = spm_vocab(("<start_of_turn>", "<end_of_turn>"))
    s["gemma2-spm"] = gguf(hparams("gemma2", 32, 2, 2, 1, 32, attention__sliding_window=(U32, 8),
                                   attn_logit_softcapping=(F32, 50.0), final_logit_softcapping=(F32, 30.0))
                           + tok + [("tokenizer.chat_template", STR, TEMPLATES["gemma"])],
                           decoder(32, 2, 2, 1, 32, V, wt="F16", et="F16", tied=True, post_norms=True))
    tok, V = spm_vocab(("[INST]", "[/INST]"))
    s["gemma3-align64"] = gguf(hparams("gemma3", 32, 2, 2, 1, 32, attention__sliding_window=(U32, 8),
                                       rope__freq_base_swa=(F32, 10000.0))
                               + [("general.alignment", U32, 64)] + tok
                               + [("tokenizer.chat_template", STR, TEMPLATES["mistral"])],
                               decoder(32, 2, 2, 1, 32, V, hd=16, wt="Q8_0", et="F16", tied=True, qk_norm=True,
                                       post_norms=True), align=64)
    tok, V = wpm_vocab()
    s["bert-wpm"] = gguf(hparams("bert", 32, 1, 4, 4, 32, ctx=16, attention__layer_norm_epsilon=(F32, 1e-12),
                                 pooling_type=(U32, 1)) + tok,
                         encoder(32, 1, 4, 32, V, 16))
    s["nomic-bert"] = gguf(hparams("nomic-bert", 32, 1, 4, 4, 32, rope__freq_base=(F32, 1000.0),
                                   pooling_type=(U32, 2)) + tok
                           + [("tokenizer.chat_template", STR, TEMPLATES["nemo"])],
                           encoder(32, 1, 4, 32, V, 16, fused=True, gated=True))
    tok, _ = bpe_vocab("gpt2")
    s["tokenizer-only"] = gguf([("general.architecture", STR, "llama")] + tok
                               + [("tokenizer.chat_template", STR, TEMPLATES["chatml"])], [])
    # every metadata type and every tensor type the reader knows, no model
    kvs = [("general.architecture", STR, "none")]
    for t, v in ((U8, 200), (I8, -100), (U16, 60000), (I16, -30000), (U32, 4000000000), (I32, -2000000000),
                 (F32, 1.5), (BOOL, True), (U64, 2 ** 63 + 1), (I64, -2 ** 62), (F64, 2.5e300)):
        kvs.append(("test.scalar.%d" % t, t, v))
        kvs.append(("test.array.%d" % t, ARR, (t, [v, v])))
    kvs.append(("test.array.str", ARR, (STR, ["", "x", "\u2581y"])))
    kvs.append(("test.array.empty", ARR, (U8, [])))
    s["alltypes"] = gguf(kvs, [mat("t." + n, GGML[n][1] * (2 if GGML[n][1] == 1 else 1), 1, n) for n in GGML])
    return s


# ---- safetensors (github.com/huggingface/safetensors, "Format"): u64 header length,
# JSON header {name: {dtype, shape, data_offsets}}, data

ST_SIZE = {"F32": 4, "F16": 2, "BF16": 2, "U32": 4, "I32": 4, "I64": 8, "F64": 8, "U64": 8, "I16": 2,
           "U16": 2, "I8": 1, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}


def safetensors(tensors, metadata=None):
    """tensors: [(name, dtype, shape, data bytes)]."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dt, shape, d in tensors:
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + len(d)]}
        data += d
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)   # writers pad the header to 8 bytes
    return struct.pack("<Q", len(h)) + h + data


def st(name, dt, shape):
    n = 1
    for d in shape:
        n *= d
    if dt in ("F32", "F16", "BF16"):
        return (name, dt, shape, floats(n, dt))
    return (name, dt, shape, bytes(rng.randrange(256) for _ in range(n * ST_SIZE[dt])))


def safetensors_seeds():
    s = {"alltypes": safetensors([st("t." + dt, dt, [2, 3]) for dt in ST_SIZE], {"format": "pt", "note": "\u00e9"}),
         "empty": safetensors([]),
         "edge-shapes": safetensors([st("scalar", "F32", []), st("zero", "F16", [0, 4]), st("eight", "U8", [1] * 8),
                                     st("after", "I64", [3])]),
         "mlx": safetensors([st("w.weight", "U32", [4, 2]), st("w.scales", "F16", [4, 1]),
                             st("w.biases", "F16", [4, 1])], {"format": "mlx"})}
    return s


# ---- Hugging Face folders (fuzz_hf input: config, marker, safetensors[, marker, index])

SEP_ST = b"\n==> model.safetensors <==\n"
SEP_IDX = b"\n==> model.safetensors.index.json <==\n"


def hf_tensors(dim, nl, nh, nkv, ff, V, hd=None, dt="F32", tied=False, biases=False, qk_norm=False, mlx=None):
    """mlx: {module prefix: bits} for matrices stored as MLX affine codes (group 32)."""
    hd = hd or dim // nh
    nq, nk = nh * hd, nkv * hd
    ts = []

    def m(prefix, ne0, ne1):
        bits = (mlx or {}).get(prefix)
        if bits:
            ts.extend([st(prefix + ".weight", "U32", [ne1, ne0 * bits // 32]), st(prefix + ".scales", "F16", [ne1, ne0 // 32]),
                       st(prefix + ".biases", "F16", [ne1, ne0 // 32])])
        else:
            ts.append(st(prefix + ".weight", dt, [ne1, ne0]))

    def v(name, n):
        ts.append((name, dt, [n], floats(n, dt, value=1.0)))

    m("model.embed_tokens", dim, V)
    v("model.norm.weight", dim)
    if not tied:
        m("lm_head", dim, V)
    for l in range(nl):
        p = "model.layers.%d." % l
        v(p + "input_layernorm.weight", dim)
        v(p + "post_attention_layernorm.weight", dim)
        m(p + "self_attn.q_proj", dim, nq)
        m(p + "self_attn.k_proj", dim, nk)
        m(p + "self_attn.v_proj", dim, nk)
        m(p + "self_attn.o_proj", nq, dim)
        if biases:
            ts.extend([st(p + "self_attn.q_proj.bias", dt, [nq]), st(p + "self_attn.k_proj.bias", dt, [nk]),
                       st(p + "self_attn.v_proj.bias", dt, [nk])])
        if qk_norm:
            v(p + "self_attn.q_norm.weight", hd)
            v(p + "self_attn.k_norm.weight", hd)
        m(p + "mlp.gate_proj", dim, ff)
        m(p + "mlp.up_proj", dim, ff)
        m(p + "mlp.down_proj", ff, dim)
    return ts


def hf_config(model_type, dim, nl, nh, nkv, ff, V, **extra):
    c = {"architectures": ["X"], "model_type": model_type, "hidden_size": dim, "num_hidden_layers": nl,
         "num_attention_heads": nh, "num_key_value_heads": nkv, "intermediate_size": ff, "vocab_size": V,
         "max_position_embeddings": 128, "rms_norm_eps": 1e-6, "hidden_act": "silu", "rope_theta": 10000.0,
         "bos_token_id": 1, "eos_token_id": 2, "tie_word_embeddings": False, "torch_dtype": "float32"}
    c.update(extra)
    return json.dumps(c, indent=2).encode()


def hf_input(cfg, tensors, index=False):
    out = cfg + SEP_ST + safetensors(tensors, {"format": "pt"})
    if index:
        wm = {t[0]: "model.safetensors" for t in tensors}
        out += SEP_IDX + json.dumps({"metadata": {"total_size": 0}, "weight_map": wm}, indent=1).encode()
    return out


def hf_seeds():
    s = {}
    s["llama-f32"] = hf_input(hf_config("llama", 16, 1, 2, 1, 16, 8), hf_tensors(16, 1, 2, 1, 16, 8))
    s["llama31-bf16-tied"] = hf_input(
        hf_config("llama", 16, 1, 2, 1, 16, 8, tie_word_embeddings=True, torch_dtype="bfloat16",
                  rope_scaling={"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                "original_max_position_embeddings": 64, "rope_type": "llama3"}),
        hf_tensors(16, 1, 2, 1, 16, 8, dt="BF16", tied=True))
    cfg = json.loads(hf_config("qwen2", 16, 1, 2, 1, 16, 8, eos_token_id=[2, 3], tie_word_embeddings=True))
    del cfg["rope_theta"]
    cfg["rope_parameters"] = {"rope_theta": 1000000.0, "rope_type": "default"}   # transformers 5
    s["qwen2-f16-bias"] = hf_input(json.dumps(cfg).encode(),
                                   hf_tensors(16, 1, 2, 1, 16, 8, dt="F16", tied=True, biases=True))
    s["qwen3-headdim-linear"] = hf_input(
        hf_config("qwen3", 16, 1, 2, 1, 16, 8, head_dim=16, rope_scaling={"type": "linear", "factor": 2.0}),
        hf_tensors(16, 1, 2, 1, 16, 8, hd=16, qk_norm=True))
    mods = ["model.embed_tokens", "lm_head"] + ["model.layers.0." + x for x in (
        "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
        "mlp.up_proj", "mlp.down_proj")]
    q = {"group_size": 32, "bits": 4, "mode": "affine", "model.layers.0.mlp.down_proj": {"group_size": 32, "bits": 8}}
    s["mlx-4bit-index"] = hf_input(
        hf_config("llama", 32, 1, 2, 1, 32, 8, quantization=q, quantization_config=q),
        hf_tensors(32, 1, 2, 1, 32, 8, dt="F16", mlx={**{m: 4 for m in mods}, "model.layers.0.mlp.down_proj": 8}),
        index=True)
    q = {"group_size": 32, "bits": 3, "model.layers.0.self_attn.q_proj": {"group_size": 32, "bits": 6},
         "model.layers.0.self_attn.k_proj": {"group_size": 32, "bits": 2}, "model.layers.0.mlp.up_proj": False}
    s["mlx-3bit-mixed"] = hf_input(
        hf_config("qwen2", 32, 1, 2, 1, 32, 8, quantization=q, tie_word_embeddings=True),
        hf_tensors(32, 1, 2, 1, 32, 8, dt="F16", tied=True, mlx={
            "model.layers.0.self_attn.q_proj": 6, "model.layers.0.self_attn.k_proj": 2,
            "model.layers.0.self_attn.v_proj": 3, "model.layers.0.self_attn.o_proj": 3,
            "model.layers.0.mlp.gate_proj": 3, "model.layers.0.mlp.down_proj": 3}))
    return s


# ---- JSON documents

def json_seeds(hf):
    s = {
        "grammar": b'{"a":[1,-2,3.5e-3,1E+300,-0,0.0,9223372036854775807,9223372036854775808,-9223372036854775808],'
                   b'"b":{"c":null,"d":true,"e":false},"s":"\\u00e9\\ud83d\\ude00\\n\\t\\"\\\\\\/\\u0000x",'
                   b'"\\u0000k":1,"":[]}',
        "utf8": '  ["h\u00e9llo", "\u2581\u2581", "\U0001F600", {"\u00fc": "\u4e2d"}]  '.encode(),
        "deep": b"[" * 63 + b"{}" + b"]" * 63,
        "scalars": b" -12.5e-7 ",
        "out-of-range": b"[1e400]",
        "string": b'"\\b\\f\\r\\u20AC"',
        "duplicate": b'{"a":1,"a":2}',
        "surrogate": b'["\\ud800", "\\udc00x"]',
    }
    # the config.json and index parts of the fuzz_hf seeds
    for name, data in hf.items():
        s["config-" + name] = data.split(SEP_ST)[0]
        if SEP_IDX in data:
            s["index-" + name] = data.split(SEP_IDX)[1]
    return s


# Vocabulary sizes of tests/fuzz/vocabs.h, in its order: SmolLM2, llama fixture, gemma3
# fixture, BERT fixture, Qwen2.5-Coder (ids past a size probe the range checks).
VOCABS = [49152, 512, 512, 512, 151936]


def text_seeds():
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "data", "tokenizer_corpus.txt"), "rb") as f:
        lines = [l for l in f.read().split(b"\n") if l]
    extra = [b"<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", b"<s>[INST] x [/INST]</s>",
             b"<start_of_turn>user\n<end_of_turn>", b"[CLS] a [SEP] b [MASK]", b"\xf0\x9f\x98\x80" * 8,
             b"a" * 300, b"\xe2\x96\x81\xe2\x96\x81x", b" \t\n\r\n  ", b"\xff\xfe\x80\xc3"]
    s = {}
    for i, text in enumerate(lines[::40] + extra):
        v = i % len(VOCABS)
        s["text-%02d" % i] = bytes([v, i % 4]) + text
    return s


def id_seeds():
    s = {}
    for v, n in enumerate(VOCABS):
        for flags in (0, 1):
            ids = [0, 1, 2, 3] + [rng.randrange(n) for _ in range(12)] + [n - 1, n, -1, 0xE2 + 3, 0x82 + 3, 0xAC + 3]
            s["ids-%d-%d" % (v, flags)] = bytes([v, flags]) + b"".join(struct.pack("<i", i) for i in ids)
    return s


def chat_seeds():
    here = os.path.dirname(os.path.abspath(__file__))
    tdir = os.path.join(here, "..", "data", "chat_templates")
    s = {}
    for name in sorted(os.listdir(tdir)):
        if name.endswith(".jinja"):
            with open(os.path.join(tdir, name), "rb") as f:
                s["template-" + name[:-6]] = f.read()
    convs = [[(0, "Be brief."), (1, "Hi"), (2, "Hello!"), (1, "  more\n")],
             [(1, "Weather?"), (2, "<think>\nhm\n</think>\n\nChecking."), (3, '{"t": 21}'), (3, "x\u0001\"\\"), (1, "ok")],
             [(1, "a"), (1, "b")], [(0, "s")], [(4, "py"), (2, "")]]
    for fam in range(7):
        for k, conv in enumerate(convs):
            body = b"".join(bytes([r]) + b"\0" + c.encode() + b"\0" for r, c in conv)
            s["conv-%d-%d" % (fam, k)] = bytes([fam, (fam * 5 + k) % 32]) + body
    return s


def server_seeds():
    """fuzz_server: byte 0 = endpoint (0 chat, 1 completions, 2 embeddings) | 4 (make a
    reply of the body) | stop reason << 3; then an OpenAI request body."""
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "weather",
                                               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
    chat = [
        {"messages": [{"role": "user", "content": "Hi"}]},
        {"model": "m", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}],
         "temperature": 0.2, "top_p": 0.9, "top_k": 20, "min_p": 0.1, "seed": 7, "max_tokens": 16, "stop": ["\n", "END"],
         "presence_penalty": 0.5, "frequency_penalty": -0.5, "repeat_penalty": 1.1, "logprobs": True, "top_logprobs": 3},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "part one "}, {"type": "text", "text": "two"}]}],
         "stream": True, "stream_options": {"include_usage": True}},
        {"messages": [{"role": "user", "content": "Weather in Paris?"},
                      {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
                          "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
                      {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21}"}],
         "tools": tools, "tool_choice": "auto"},
        {"messages": [{"role": "user", "content": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>'}],
         "tools": tools},
        {"messages": [{"role": "developer", "content": "x"}, {"role": "user", "content": "y"}], "n": 1,
         "response_format": {"type": "text"}},
    ]
    s = {}
    for i, body in enumerate(chat):
        s["chat-%d" % i] = bytes([0 | (4 if i % 2 else 0) | ((i % 4) << 3)]) + json.dumps(body).encode()
    s["completion"] = bytes([1 | 4]) + json.dumps({"prompt": "Once upon a time", "max_tokens": 8, "logprobs": 2}).encode()
    s["completion-list"] = bytes([1]) + json.dumps({"prompt": ["one prompt"], "stream": True}).encode()
    s["embed"] = bytes([2]) + json.dumps({"input": ["a sentence", "another"], "model": "e"}).encode()
    s["embed-one"] = bytes([2]) + json.dumps({"input": "one"}).encode()
    return s


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
    hf = hf_seeds()
    sts = safetensors_seeds()
    sts.update({"hf-" + k: v.split(SEP_ST)[1].split(SEP_IDX)[0] for k, v in hf.items()})
    sets = {"fuzz_gguf": (gguf_seeds(), ".gguf"), "fuzz_safetensors": (sts, ".safetensors"),
            "fuzz_json": (json_seeds(hf), ".json"), "fuzz_hf": (hf, ".bin"),
            "fuzz_tokenize": (text_seeds(), ".bin"), "fuzz_detok": (id_seeds(), ".bin"), "fuzz_chat": (chat_seeds(), ".bin"),
            "fuzz_server": (server_seeds(), ".bin")}
    for target, (seeds, ext) in sets.items():
        d = os.path.join(root, target)
        os.makedirs(d, exist_ok=True)
        for name, data in seeds.items():
            with open(os.path.join(d, "seed-" + name + ext), "wb") as f:
                f.write(data)
        print("%s: %d seeds, %d bytes" % (target, len(seeds), sum(len(v) for v in seeds.values())))


if __name__ == "__main__":
    main()
