#!/usr/bin/env python3
"""Reference sentence embeddings for tests/model/test_embed_real.c, computed with
sentence-transformers (torch) from the original Hugging Face model directory:

    tools/embed_refs.py MODEL_DIR SENTENCES.txt OUT_DIR

Writes OUT_DIR/ids.txt (the tokenizer's ids per sentence, comma-separated) and
OUT_DIR/embeddings.f32 ([n][dim] little-endian float32, normalised as the model's
pipeline does). Needs torch + sentence-transformers (run it where they are installed,
e.g. the GPU machine); the outputs are committed so tests need neither."""
import os
import sys

import numpy as np
from sentence_transformers import SentenceTransformer

model_dir, sent_path, out = sys.argv[1:4]
sents = [l.rstrip("\n") for l in open(sent_path, encoding="utf-8") if l.strip()]
m = SentenceTransformer(model_dir, device="cpu")
emb = m.encode(sents, batch_size=8, convert_to_numpy=True, normalize_embeddings=False).astype("<f4")
os.makedirs(out, exist_ok=True)
emb.tofile(os.path.join(out, "embeddings.f32"))
tok = m.tokenizer
with open(os.path.join(out, "ids.txt"), "w") as f:
    for s in sents:
        f.write(",".join(map(str, tok(s)["input_ids"])) + "\n")
print(len(sents), emb.shape, "written to", out)
