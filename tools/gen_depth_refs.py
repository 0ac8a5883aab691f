#!/usr/bin/env python3
"""Hugging Face reference logits at depth for tests/model/test_depth.c (issue #26).

    tools/gen_depth_refs.py [FIXTURES_DIR] [OUT_DIR]
    (defaults: ../shared/fixtures/hf and tests/data/depth, relative to the repository)

For each decoder fixture (llama, llama31, qwen2, qwen3, gemma, gemma2, gemma3) the Hugging
Face model is rebuilt from the fixture's NAME-f32.gguf and config.json: config.json gives
the architecture (the HF class from `architectures`), and the GGUF's float32 tensors are
mapped back to HF names, undoing what llama.cpp's converter did to them:
  - llama's Q and K rows are permuted per head for interleaved RoPE: un-permuted;
  - Gemma's RMSNorm weights (all four families of norm, Q/K norms included) were stored
    as 1 + w: 1 is subtracted (HF's GemmaRMSNorm multiplies by 1 + w);
  - tied output weights: HF ties lm_head to the embedding itself; llama31's
    rope_freqs.weight is dropped (HF derives the llama3 frequencies from config.json).
The rebuilt model must load with strict=True and reproduce the fixture's logits.hf.f32
for the manifest's 24-token prompt (max |out - ref| / max |ref| <= 1e-5); a model that
does not is left out (the script says so and writes nothing for it).

The depth prompt: N = 4200 ids (more than 4096; 8 prefill chunks of 512 and a partial
one), id 1 (BOS) then numpy.random.default_rng(26).integers(3, 512, N - 1): the same ids
for every model (all have the vocabulary of 512). They are written to OUT_DIR/ids.i32
(N little-endian int32). Each model runs them in one sequence from position 0, float32,
eager attention, on the CPU; OUT_DIR/NAME.f32 gets the logits of the last 8 positions
([8][512] little-endian float32, positions N-8 .. N-1). Gemma 2 and Gemma 3's sliding
layers (window 8) are then 525 windows deep. HF's default RoPE has no position limit, so
max_position_embeddings (512 in the configs) does not cap these positions.

Needs torch, transformers (5.x), numpy and gguf; not needed by the tests, which read the
committed outputs. Made with torch 2.15 (CPU) and transformers 5.24.
"""
import json
import os
import sys

import numpy as np
import gguf
import torch
import transformers

N_IDS = 4200
N_LAST = 8
SEED = 26
MODELS = ["llama", "llama31", "qwen2", "qwen3", "gemma", "gemma2", "gemma3"]

LAYER_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight", "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight", "attn_output.weight": "self_attn.o_proj.weight",
    "attn_q.bias": "self_attn.q_proj.bias", "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.bias": "self_attn.v_proj.bias",
    "attn_q_norm.weight": "self_attn.q_norm.weight", "attn_k_norm.weight": "self_attn.k_norm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight", "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
# Gemma 2/3 norm around attention and FFN: GGUF's ffn_norm is HF's pre-FFN norm there.
GEMMA_POST = {
    "post_attention_norm.weight": "post_attention_layernorm.weight",
    "ffn_norm.weight": "pre_feedforward_layernorm.weight",
    "post_ffw_norm.weight": "post_feedforward_layernorm.weight",
}


def unpermute(w, n_head):
    """Inverse of the converter's Q/K permutation (HF's rotate-half rows -> interleaved pairs)."""
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def state_dict(path, cfg):
    post_norms = cfg["model_type"] in ("gemma2", "gemma3_text")
    gemma = cfg["model_type"].startswith("gemma")
    n_head, n_kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    sd = {}
    for t in gguf.GGUFReader(path).tensors:
        assert t.tensor_type == gguf.GGMLQuantizationType.F32, t.name
        w = np.array(t.data, dtype=np.float32).reshape([int(d) for d in reversed(t.shape)])
        if t.name == "rope_freqs.weight":
            continue
        if t.name == "token_embd.weight":
            name = "model.embed_tokens.weight"
        elif t.name == "output_norm.weight":
            name = "model.norm.weight"
        elif t.name == "output.weight":
            name = "lm_head.weight"
        else:
            _, layer, rest = t.name.split(".", 2)
            table = dict(LAYER_NAMES, **GEMMA_POST) if post_norms else dict(LAYER_NAMES, **{"ffn_norm.weight": "post_attention_layernorm.weight"})
            name = f"model.layers.{layer}.{table[rest]}"
            if cfg["model_type"] == "llama" and rest == "attn_q.weight":
                w = unpermute(w, n_head)
            if cfg["model_type"] == "llama" and rest == "attn_k.weight":
                w = unpermute(w, n_kv)
        if gemma and name.endswith("norm.weight"):
            w = w - np.float32(1)
        sd[name] = torch.from_numpy(np.ascontiguousarray(w))
    return sd


def build(fixtures, name):
    with open(os.path.join(fixtures, name, "config.json")) as f:
        cfg = json.load(f)
    config = transformers.AutoConfig.from_pretrained(os.path.join(fixtures, name))
    config._attn_implementation = "eager"
    cls = getattr(transformers, cfg["architectures"][0])
    torch.manual_seed(0)
    model = cls(config).to(torch.float32).eval()
    sd = state_dict(os.path.join(fixtures, name, f"{name}-f32.gguf"), cfg)
    if cfg.get("tie_word_embeddings"):
        sd.setdefault("lm_head.weight", sd["model.embed_tokens.weight"])
    missing, unexpected = model.load_state_dict(sd, strict=False)
    missing = [k for k in missing if "rotary_emb" not in k]
    if missing or unexpected:
        raise ValueError(f"missing {missing}, unexpected {unexpected}")
    return model


@torch.no_grad()
def logits(model, ids):
    x = torch.tensor([ids], dtype=torch.long)
    return model(input_ids=x, use_cache=False).logits[0].float().numpy()


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    fixtures = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "..", "shared", "fixtures", "hf")
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(root, "tests", "data", "depth")
    torch.set_grad_enabled(False)
    with open(os.path.join(fixtures, "manifest.json")) as f:
        prompt = json.load(f)["prompt_ids"]
    ids = np.concatenate([[1], np.random.default_rng(SEED).integers(3, 512, N_IDS - 1)]).astype("<i4")
    os.makedirs(out, exist_ok=True)
    ids.tofile(os.path.join(out, "ids.i32"))
    for name in MODELS:
        try:
            model = build(fixtures, name)
        except (ValueError, KeyError, AssertionError) as e:
            print(f"{name}: not rebuilt ({e}); left out")
            continue
        ref = np.fromfile(os.path.join(fixtures, name, "logits.hf.f32"), dtype="<f4").reshape(len(prompt), -1)
        got = logits(model, prompt)
        err = float(np.abs(got - ref).max() / np.abs(ref).max())
        if not err <= 1e-5:
            print(f"{name}: the rebuilt model misses the fixture's logits by {err:.3g}; left out")
            continue
        deep = logits(model, ids.tolist())[-N_LAST:]
        deep.astype("<f4").tofile(os.path.join(out, f"{name}.f32"))
        print(f"{name}: fixture logits reproduced to {err:.2e}; last {N_LAST} of {N_IDS} positions written "
              f"(max |logit| {np.abs(deep).max():.3g})")


if __name__ == "__main__":
    main()
