#!/usr/bin/env python3
"""Make tests/data/yarn/, the Hugging Face references for YaRN RoPE scaling that
tests/model/test_yarn.c checks akunu against.

    /tmp/hfenv/bin/python tools/gen_yarn_refs.py     # rewrites tests/data/yarn/

Needs torch, transformers (5.x), numpy, safetensors, sentencepiece and gguf, and
llama.cpp's converter from the vendored tree (third_party/llama_cpp_python-*/vendor/
llama.cpp). CI does not run this; it reads the committed files.

What it makes (seeded, so a rerun with the same versions gives the same model):
  hf/config.json, hf/model.safetensors
      a tiny Qwen3ForCausalLM (vocab 512, hidden 32, 2 layers, 2 heads of 32 over 1 KV
      head, tied embeddings), random float32 weights scaled so that activations and
      attention carry signal, with rope_parameters {rope_type yarn, rope_theta 1000,
      factor 4, original_max_position_embeddings 32, beta_fast 16, beta_slow 0.5} and
      max_position_embeddings 128: the prompt goes three times past the original context.
  yarn-f32.gguf
      the same model converted by llama.cpp's convert_hf_to_gguf.py (--outtype f32); its
      vocabulary is a 512-piece SentencePiece model trained on tests/data/
      tokenizer_corpus.txt (the converter wants one; the test feeds ids).
  logits.hf.f32
      transformers' float32 logits (eager attention), [96][512] little-endian, for
      manifest.json's 96 prompt_ids fed as one sequence from position 0.
  cases/NAME.json
      config.json variants for the parameter paths (defaults, truncate false,
      attention_factor, mscale / mscale_all_dim, legacy rope_scaling, top-level
      original_max_position_embeddings, null factor, zero betas), each with "_expect":
      {"inv_freq": [16], "attention_factor": x} from transformers' own
      ROPE_INIT_FUNCTIONS["yarn"] on that file as it loads it.
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch
import transformers
from transformers import AutoConfig, Qwen3Config, Qwen3ForCausalLM
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "tests", "data", "yarn")
CONVERTER = sorted(glob.glob(os.path.join(ROOT, "third_party", "llama_cpp_python-*", "vendor", "llama.cpp",
                                          "convert_hf_to_gguf.py")))
N_PROMPT = 96
ROPE = {"rope_type": "yarn", "rope_theta": 1000.0, "factor": 4.0, "original_max_position_embeddings": 32,
        "beta_fast": 16.0, "beta_slow": 0.5}


def make_model():
    torch.manual_seed(26)
    cfg = Qwen3Config(vocab_size=512, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, head_dim=32, max_position_embeddings=128,
                      rms_norm_eps=1e-6, tie_word_embeddings=True, bos_token_id=1, eos_token_id=2,
                      rope_parameters=dict(ROPE), attn_implementation="eager")
    model = Qwen3ForCausalLM(cfg).float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("q_norm.weight", "k_norm.weight")):
                p.copy_(2.0 + 0.3 * torch.randn_like(p))  # sharp attention: positions matter
            elif "norm" in name:
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            elif "embed_tokens" in name:
                p.copy_(torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) / p.shape[1] ** 0.5)
    return model


def train_tokenizer(dest):
    import sentencepiece as spm
    spm.SentencePieceTrainer.train(input=os.path.join(ROOT, "tests", "data", "tokenizer_corpus.txt"),
                                   model_prefix=os.path.join(dest, "tokenizer"), vocab_size=512,
                                   model_type="bpe", character_coverage=1.0, unk_id=0, bos_id=1, eos_id=2,
                                   pad_id=-1, num_threads=1, minloglevel=2)


def convert(hf_dir, out):
    if not CONVERTER:
        sys.exit("llama.cpp's convert_hf_to_gguf.py not found under third_party/")
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "tiny-yarn")
        shutil.copytree(hf_dir, src)
        train_tokenizer(src)
        subprocess.run([sys.executable, CONVERTER[-1], src, "--outtype", "f32", "--outfile", out], check=True,
                       stdout=subprocess.DEVNULL)


def expect(cfg_dict):
    """transformers' YaRN inverse frequencies and attention factor for this config.json."""
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "config.json"), "w") as f:
            json.dump(cfg_dict, f)
        cfg = AutoConfig.from_pretrained(tmp)
    rp = cfg.rope_parameters
    assert rp["rope_type"] == "yarn", rp
    inv, af = ROPE_INIT_FUNCTIONS["yarn"](cfg, "cpu")
    return {"inv_freq": [float(x) for x in inv.float().numpy()], "attention_factor": float(af)}


def cases():
    """Variants of the model's config.json: name -> (rope dict or None, top-level changes)."""
    y = {"rope_type": "yarn", "rope_theta": 1000.0, "factor": 4.0, "original_max_position_embeddings": 32}
    legacy = {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32, "beta_slow": 0.25}
    return {
        "model": (dict(ROPE), {}),
        "defaults": (dict(y), {}),
        "no_truncate": (dict(y, beta_fast=16.0, beta_slow=0.5, truncate=False), {}),
        "attention_factor": (dict(y, attention_factor=1.5), {}),
        "mscale": (dict(y, mscale=1.0, mscale_all_dim=0.5), {}),
        "zero_betas": (dict(y, beta_fast=0, beta_slow=0), {}),
        "factor_null": (dict(y, factor=None), {}),
        "factor_8_theta_1e6": (dict(y, factor=8.0, rope_theta=1e6, original_max_position_embeddings=16), {}),
        "top_level_orig": (dict(y), {"original_max_position_embeddings": 16}),
        "legacy_rope_scaling": (None, {"rope_scaling": legacy, "rope_theta": 1000.0}),
    }


def main():
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    hf_dir = os.path.join(OUT, "hf")
    os.makedirs(os.path.join(OUT, "cases"))
    model = make_model()
    model.save_pretrained(hf_dir, safe_serialization=True)
    for extra in os.listdir(hf_dir):
        if extra not in ("config.json", "model.safetensors"):
            os.remove(os.path.join(hf_dir, extra))
    convert(hf_dir, os.path.join(OUT, "yarn-f32.gguf"))

    rng = np.random.default_rng(26)
    ids = [1] + [int(x) for x in rng.integers(3, 512, N_PROMPT - 1)]
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].float().numpy()
    assert logits.shape == (N_PROMPT, 512)
    logits.astype("<f4").tofile(os.path.join(OUT, "logits.hf.f32"))
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump({"prompt_ids": ids, "transformers": transformers.__version__, "torch": torch.__version__}, f, indent=1)

    with open(os.path.join(hf_dir, "config.json")) as f:
        base = json.load(f)
    for name, (rope, top) in cases().items():
        c = dict(base)
        if rope is None:
            c.pop("rope_parameters", None)
        else:
            c["rope_parameters"] = rope
        c.update(top)
        c["_expect"] = expect(c)
        with open(os.path.join(OUT, "cases", name + ".json"), "w") as f:
            json.dump(c, f, indent=1)
        print(f"{name}: attention_factor {c['_expect']['attention_factor']:.6f}")


if __name__ == "__main__":
    main()
