#!/usr/bin/env python3
"""Convert a Hugging Face BERT model (config.json, model.safetensors, vocab.txt, optionally
sentence-transformers' 1_Pooling/config.json) to a GGUF file akunu loads.

    tools/convert_bert.py MODEL_DIR OUT.gguf [--f16]

Tensor names and tokenizer metadata follow the GGUF conventions for `bert` (the ones the
fixture in ../shared/fixtures/hf/bert uses): WordPiece vocabulary in "phantom space" form
(word-initial pieces carry U+2581, "##" continuations lose the marker, [BRACKETED] special
tokens stay as they are). Needs numpy and gguf (pip install gguf numpy); the safetensors
file is read directly (its header is JSON, the data little-endian)."""
import argparse
import json
import os
import struct
import sys

import numpy as np
import gguf

DT = {"F32": np.float32, "F16": np.float16, "BF16": None, "I64": np.int64, "I32": np.int32}


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
        out = {}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            start, end = info["data_offsets"]
            f.seek(base + start)
            raw = f.read(end - start)
            if info["dtype"] == "BF16":
                a = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
            else:
                a = np.frombuffer(raw, DT[info["dtype"]]).astype(np.float32)
            out[name] = a.reshape(info["shape"])
    return out


def phantom(tok):
    if tok.startswith("[") and tok.endswith("]"):
        return tok
    if tok.startswith("##"):
        return tok[2:]
    return "\u2581" + tok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("out")
    ap.add_argument("--f16", action="store_true", help="store the 2-D matrices as F16")
    a = ap.parse_args()
    cfg = json.load(open(os.path.join(a.model_dir, "config.json")))
    if cfg.get("model_type") != "bert":
        sys.exit(f"convert_bert: model_type {cfg.get('model_type')!r} is not bert")
    w = read_safetensors(os.path.join(a.model_dir, "model.safetensors"))
    w = {k[5:] if k.startswith("bert.") else k: v for k, v in w.items()}
    pooling = 1  # mean
    pc = os.path.join(a.model_dir, "1_Pooling", "config.json")
    if os.path.exists(pc):
        p = json.load(open(pc))
        pooling = 2 if p.get("pooling_mode_cls_token") else 1
    vocab = [l.rstrip("\n") for l in open(os.path.join(a.model_dir, "vocab.txt"), encoding="utf-8")]

    wr = gguf.GGUFWriter(a.out, "bert")
    wr.add_name(os.path.basename(os.path.normpath(a.model_dir)))
    wr.add_context_length(cfg["max_position_embeddings"])
    wr.add_embedding_length(cfg["hidden_size"])
    wr.add_feed_forward_length(cfg["intermediate_size"])
    wr.add_block_count(cfg["num_hidden_layers"])
    wr.add_head_count(cfg["num_attention_heads"])
    wr.add_layer_norm_eps(cfg["layer_norm_eps"])
    wr.add_causal_attention(False)
    wr.add_pooling_type(gguf.PoolingType(pooling))
    wr.add_file_type(1 if a.f16 else 0)

    special = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}
    types = [3 if t in special else (5 if t.startswith("[unused") else 1) for t in vocab]
    wr.add_tokenizer_model("bert")
    wr.add_tokenizer_pre("default")
    wr.add_token_list([phantom(t) for t in vocab])
    wr.add_token_types(types)
    wr.add_token_type_count(cfg.get("type_vocab_size", 2))
    ids = {t: i for i, t in enumerate(vocab)}
    wr.add_bos_token_id(ids["[CLS]"])
    wr.add_eos_token_id(ids["[SEP]"])
    wr.add_unk_token_id(ids["[UNK]"])
    wr.add_sep_token_id(ids["[SEP]"])
    wr.add_pad_token_id(ids["[PAD]"])
    wr.add_mask_token_id(ids["[MASK]"])
    wr.add_add_bos_token(True)
    wr.add_add_eos_token(True)

    def put(name, arr):
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        if a.f16 and arr.ndim == 2:
            arr = arr.astype(np.float16)
        wr.add_tensor(name, arr)

    put("token_embd.weight", w["embeddings.word_embeddings.weight"])
    put("position_embd.weight", w["embeddings.position_embeddings.weight"])
    put("token_types.weight", w["embeddings.token_type_embeddings.weight"])
    put("token_embd_norm.weight", w["embeddings.LayerNorm.weight"])
    put("token_embd_norm.bias", w["embeddings.LayerNorm.bias"])
    names = {
        "attention.self.query": "attn_q", "attention.self.key": "attn_k", "attention.self.value": "attn_v",
        "attention.output.dense": "attn_output", "attention.output.LayerNorm": "attn_output_norm",
        "intermediate.dense": "ffn_up", "output.dense": "ffn_down", "output.LayerNorm": "layer_output_norm",
    }
    for l in range(cfg["num_hidden_layers"]):
        for hf, gg in names.items():
            for part in ("weight", "bias"):
                put(f"blk.{l}.{gg}.{part}", w[f"encoder.layer.{l}.{hf}.{part}"])
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    print(a.out)


if __name__ == "__main__":
    main()
