#!/usr/bin/env python3
"""Build a Hugging Face / MLX checkpoint directory from a GGUF fixture.

    make_mlx.py IN.gguf OUT_DIR --bits {2,3,4,6,8,none} [--group 64] [--dtype f16|bf16|f32]
                [--shards N] [--override NAME=BITS|NAME=none ...] [--rope-style hf5|hf4]

OUT_DIR receives config.json and model.safetensors (or N shards with
model.safetensors.index.json), with Hugging Face tensor names (model.embed_tokens,
model.layers.N.self_attn.q_proj, ..., lm_head). GGUF converters permute llama's Q and K
rows so that RoPE rotates interleaved pairs; that permutation is undone here, so the
result is a true HF-layout checkpoint (RoPE over halves).

--dtype is the model's float type (default f32 for --bits none, f16 otherwise, as
mlx-lm writes an f16 model): plain tensors are stored in it, and quantized matrices are
cast to it before quantizing, their scales and biases stored in it too (what MLX does).

--bits N quantizes every matrix whose row length is a multiple of the group size (as
mlx-lm's default predicate does; the others stay plain) with MLX's affine algorithm, per
group of `group` values of a row, computed in float32:
    w_min, w_max = min, max;  n = 2^bits - 1
    scale = max((w_max - w_min) / n, 1e-7), negated unless |w_min| > |w_max|
    edge = w_min if |w_min| > |w_max| else w_max;  q0 = rint(edge / scale)
    if q0 != 0: scale = edge / q0, bias = edge  else: bias = 0
    q = clip(rint((w - bias) / scale), 0, n)
codes packed as one little-endian bit stream per row (code k at bits k*bits..), stored
as uint32 words [rows, cols*bits/32]; scales and biases [rows, cols/group].
config.json gets "quantization" (and "quantization_config") {group_size, bits, mode},
plus one entry per --override (NAME is the module path, e.g.
model.layers.0.mlp.down_proj; BITS a width, or none to leave it plain).

config.json starts from the config.json beside the GGUF when there is one (the HF
fixtures carry theirs); --rope-style hf4 rewrites transformers-5 "rope_parameters" into
the older top-level rope_theta / rope_scaling. Needs numpy and gguf (no torch).
"""
import argparse
import json
import os
import sys

import numpy as np
import gguf


def hf_name(name):
    """GGUF tensor name -> HF name (None: not part of an HF checkpoint)."""
    fixed = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
             "output.weight": "lm_head.weight"}
    if name in fixed:
        return fixed[name]
    if not name.startswith("blk."):
        return None
    _, layer, rest = name.split(".", 2)
    table = {
        "attn_norm.weight": "input_layernorm.weight", "ffn_norm.weight": "post_attention_layernorm.weight",
        "attn_q.weight": "self_attn.q_proj.weight", "attn_k.weight": "self_attn.k_proj.weight",
        "attn_v.weight": "self_attn.v_proj.weight", "attn_output.weight": "self_attn.o_proj.weight",
        "attn_q.bias": "self_attn.q_proj.bias", "attn_k.bias": "self_attn.k_proj.bias",
        "attn_v.bias": "self_attn.v_proj.bias", "attn_output.bias": "self_attn.o_proj.bias",
        "attn_q_norm.weight": "self_attn.q_norm.weight", "attn_k_norm.weight": "self_attn.k_norm.weight",
        "ffn_gate.weight": "mlp.gate_proj.weight", "ffn_up.weight": "mlp.up_proj.weight",
        "ffn_down.weight": "mlp.down_proj.weight",
    }
    return f"model.layers.{layer}.{table[rest]}" if rest in table else None


def unpermute(w, n_head):
    """Inverse of the GGUF llama converter's Q/K row permutation (per head, the rows
    [0, 2, 4, ..., 1, 3, 5, ...] of HF's halves layout became interleaved pairs)."""
    shape = w.shape
    return w.reshape(n_head, shape[0] // n_head // 2, 2, *shape[1:]).swapaxes(1, 2).reshape(shape)


def field(r, key, default=None):
    f = r.fields.get(key)
    if f is None:
        return default
    v = f.parts[f.data[0]]
    return v.tobytes().decode() if f.types[0] == gguf.GGUFValueType.STRING else v[0].item()


NP_DTYPE = {"f32": np.float32, "f16": np.float16}
ST_DTYPE = {"f32": "F32", "f16": "F16", "bf16": "BF16"}


def to_dtype(a, dtype):
    """float32 array -> (bytes-ready array, safetensors dtype)."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    if dtype == "bf16":  # round to nearest even
        u = a.view(np.uint32)
        r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
        return r, "BF16"
    return a.astype(NP_DTYPE[dtype]), ST_DTYPE[dtype]


def from_dtype(a, dtype):
    if dtype == "bf16":
        return (a.astype(np.uint32) << 16).view(np.float32)
    return a.astype(np.float32)


def mlx_quantize(w, bits, group):
    """MLX affine quantization of w (rows, cols), float32 arithmetic. Returns codes
    (rows, cols) uint32 and float32 scales, biases (rows, cols/group)."""
    rows, cols = w.shape
    x = w.astype(np.float32).reshape(rows, cols // group, group)
    n = np.float32(2 ** bits - 1)
    w_max, w_min = x.max(axis=-1), x.min(axis=-1)
    mask = np.abs(w_min) > np.abs(w_max)
    scale = np.maximum((w_max - w_min) / n, np.float32(1e-7))
    scale = np.where(mask, scale, -scale)
    edge = np.where(mask, w_min, w_max)
    q0 = np.rint(edge / scale)
    nz = q0 != 0
    scale = np.where(nz, edge / np.where(nz, q0, np.float32(1)), scale).astype(np.float32)
    bias = np.where(nz, edge, np.float32(0)).astype(np.float32)
    q = np.clip(np.rint((x - bias[..., None]) / scale[..., None]), 0, n).astype(np.uint32)
    return q.reshape(rows, cols), scale, bias


def pack(codes, bits):
    """(rows, cols) codes -> (rows, cols*bits/32) uint32: an LSB-first bit stream per row."""
    rows, cols = codes.shape
    bitplanes = (codes[..., None] >> np.arange(bits, dtype=np.uint32)) & 1
    stream = bitplanes.reshape(rows, cols * bits).astype(np.uint8)
    return np.packbits(stream, axis=1, bitorder="little").view("<u4").reshape(rows, cols * bits // 32)


def write_safetensors(path, tensors, metadata):
    """tensors: list of (name, array, dtype string)."""
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, a, dt in tensors:
        b = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for b in blobs:
            f.write(b)


def make_config(r, gguf_path, args, tied):
    side = os.path.join(os.path.dirname(os.path.abspath(gguf_path)), "config.json")
    arch = field(r, "general.architecture")
    if os.path.exists(side):
        with open(side) as f:
            cfg = json.load(f)
    else:
        a = arch
        heads = field(r, f"{a}.attention.head_count")
        dim = field(r, f"{a}.embedding_length")
        cfg = {"architectures": [{"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                                  "qwen3": "Qwen3ForCausalLM"}[a]], "model_type": a,
               "hidden_size": dim, "num_hidden_layers": field(r, f"{a}.block_count"),
               "num_attention_heads": heads, "num_key_value_heads": field(r, f"{a}.attention.head_count_kv", heads),
               "head_dim": field(r, f"{a}.attention.key_length", dim // heads),
               "intermediate_size": field(r, f"{a}.feed_forward_length"),
               "rms_norm_eps": field(r, f"{a}.attention.layer_norm_rms_epsilon", 1e-6),
               "rope_parameters": {"rope_theta": field(r, f"{a}.rope.freq_base", 10000.0), "rope_type": "default"},
               "max_position_embeddings": field(r, f"{a}.context_length", 2048), "hidden_act": "silu",
               "vocab_size": int(next(t for t in r.tensors if t.name == "token_embd.weight").data.shape[0]),
               "tie_word_embeddings": tied, "bos_token_id": field(r, "tokenizer.ggml.bos_token_id"),
               "eos_token_id": field(r, "tokenizer.ggml.eos_token_id")}
    cfg["torch_dtype"] = cfg["dtype"] = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}[args.dtype]
    if args.rope_style == "hf4" and isinstance(cfg.get("rope_parameters"), dict):
        rp = dict(cfg.pop("rope_parameters"))
        cfg["rope_theta"] = rp.pop("rope_theta", 10000.0)
        if rp.get("rope_type", "default") != "default":
            cfg["rope_scaling"] = rp
    return cfg


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("gguf")
    ap.add_argument("out")
    ap.add_argument("--bits", required=True, choices=["2", "3", "4", "5", "6", "8", "none"])
    ap.add_argument("--group", type=int, default=64, choices=[32, 64, 128])
    ap.add_argument("--dtype", choices=["f32", "f16", "bf16"])
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--override", action="append", default=[])
    ap.add_argument("--rope-style", choices=["hf5", "hf4"], default="hf5")
    ap.add_argument("--dequant-out", help="also write the same model with every quantized matrix dequantized "
                    "to F32 (float32 scale*q + bias, two roundings): the engine must give the same logits")
    args = ap.parse_args()
    bits = None if args.bits == "none" else int(args.bits)
    if args.dtype is None:
        args.dtype = "f32" if bits is None else "f16"
    overrides = {}
    for o in args.override:
        name, _, b = o.partition("=")
        overrides[name] = None if b == "none" else int(b)

    r = gguf.GGUFReader(args.gguf)
    arch = field(r, "general.architecture")
    if arch not in ("llama", "qwen2", "qwen3"):
        sys.exit(f"make_mlx: architecture {arch} not handled")
    n_head = field(r, f"{arch}.attention.head_count")
    n_kv = field(r, f"{arch}.attention.head_count_kv", n_head)
    names = {t.name for t in r.tensors}
    tied = "output.weight" not in names
    cfg = make_config(r, args.gguf, args, tied)
    if cfg.get("tie_word_embeddings"):
        tied = True

    out, deq_out = [], []
    for t in r.tensors:
        name = hf_name(t.name)
        if name is None or (tied and name == "lm_head.weight"):
            continue
        if t.tensor_type != gguf.GGMLQuantizationType.F32:
            sys.exit(f"make_mlx: {t.name} is {t.tensor_type.name}; pass an f32 GGUF")
        w = np.array(t.data, dtype=np.float32)  # numpy order: [rows, cols], as HF
        if arch == "llama" and t.name.endswith(("attn_q.weight", "attn_q.bias")):
            w = unpermute(w, n_head)
        elif arch == "llama" and t.name.endswith(("attn_k.weight", "attn_k.bias")):
            w = unpermute(w, n_kv)
        module = name[: -len(".weight")] if name.endswith(".weight") else None
        b = overrides.get(module, bits) if module else None
        if w.ndim == 2 and b is not None and w.shape[1] % args.group == 0 and not name.endswith("norm.weight"):
            wd = from_dtype(to_dtype(w, args.dtype)[0], args.dtype)  # the model in its float type
            q, s, c = mlx_quantize(wd, b, args.group)
            sa, sdt = to_dtype(s, args.dtype)
            ca, _ = to_dtype(c, args.dtype)
            out += [(name, pack(q, b), "U32"), (module + ".scales", sa, sdt), (module + ".biases", ca, sdt)]
            deq = from_dtype(sa, args.dtype).repeat(args.group, axis=1) * q.astype(np.float32) + \
                from_dtype(ca, args.dtype).repeat(args.group, axis=1)
            err = np.linalg.norm(deq - w) / max(np.linalg.norm(w), 1e-30)
            print(f"{name:48s} {b}-bit g{args.group} {sdt:4s} rel_l2 {err:.3g}")
            deq_out.append((name, deq.astype(np.float32), "F32"))
        else:
            a, dt = to_dtype(w, args.dtype)
            out.append((name, a, dt))
            deq_out.append((name, from_dtype(a, args.dtype), "F32"))
            print(f"{name:48s} {dt}")

    q = {"group_size": args.group, "bits": bits, "mode": "affine"} if bits is not None else None
    if q:
        for k, v in overrides.items():
            q[k] = False if v is None else {"group_size": args.group, "bits": v}
        cfg["quantization"] = q
        cfg["quantization_config"] = q
    os.makedirs(args.out, exist_ok=True)
    for f in os.listdir(args.out):
        if f.endswith(".safetensors") or f == "model.safetensors.index.json":
            os.remove(os.path.join(args.out, f))
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    meta = {"format": "mlx" if bits is not None else "pt"}
    n = max(1, args.shards)
    if n == 1:
        write_safetensors(os.path.join(args.out, "model.safetensors"), out, meta)
    else:
        wmap = {}
        for i in range(n):
            fn = f"model-{i + 1:05d}-of-{n:05d}.safetensors"
            part = out[i::n]
            write_safetensors(os.path.join(args.out, fn), part, meta)
            wmap.update({name: fn for name, _, _ in part})
        with open(os.path.join(args.out, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": sum(a.nbytes for _, a, _ in out)}, "weight_map": wmap}, f, indent=2)
    print(f"{args.out}: {len(out)} tensors, {n} file(s)")
    if args.dequant_out:
        os.makedirs(args.dequant_out, exist_ok=True)
        cfg.pop("quantization", None)
        cfg.pop("quantization_config", None)
        cfg["torch_dtype"] = cfg["dtype"] = "float32"
        with open(os.path.join(args.dequant_out, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
        write_safetensors(os.path.join(args.dequant_out, "model.safetensors"), deq_out, {"format": "pt"})
        print(f"{args.dequant_out}: dequantized copy")


if __name__ == "__main__":
    main()
