#!/usr/bin/env python3
"""Writes the expected token ids for tests/data/tokenizer_corpus.txt into
tests/data/tokenizer_refs/, so that tests/model/test_tokenizer.c needs neither Python
nor Hugging Face at test time.

How the references are made: for each GGUF below, a Hugging Face `tokenizers`
Tokenizer is built from the GGUF's own metadata (tokens, scores, token types, merges)
with the rules llama.cpp applies to that metadata, and encodes the corpus:
  - tokenizer.ggml.model = llama (SentencePiece): a BPE model with byte fallback whose
    merges are every split of a normal token into two tokens, ranked by the score of the
    merged token; normalizer Prepend(U+2581) (when add_space_prefix) + Replace(' ', U+2581),
    applied to each stretch of text between special tokens.
  - gpt2 (byte-level BPE): the GGUF merges; pre-tokenizer Split(<regex of
    tokenizer.ggml.pre>, isolated) + ByteLevel(no regex), or for smollm Digits(individual)
    + ByteLevel(gpt2 regex), which is what SmolLM2's own tokenizer.json holds;
    ignore_merges for llama-bpe.
  - bert (WordPiece): the GGUF's phantom-space vocab turned back into HF form (U+2581x ->
    x, bare x -> ##x), BertNormalizer(lowercase as tokenizer.ggml.normalizer.lowercase),
    BertPreTokenizer, WordPiece(unk [UNK]). wpm-vocab.gguf is a WordPiece vocab of 800
    trained on the corpus itself with HF's WordPieceTrainer (the BERT fixture's vocab
    holds only special tokens), written as llama.cpp's converter writes BERT vocabs.
  - control (type 3) and unknown (2) tokens are special added tokens, user-defined (4)
    plain added tokens; encode_special_tokens=True gives the parse_special=false ids.
Files written (one line per corpus line, ids or byte offsets separated by spaces):
  NAME.ids          parse_special on, no BOS/EOS
  NAME.raw.ids      parse_special off (not for the pre-tokenizer variants smollm2-llama3/-qwen2)
  NAME.whole.ids    the whole corpus as one text (newlines included), one line
  split-PRE.txt     pre-tokenizer word ends (byte offsets) for PRE in gpt2 llama3 qwen2 smollm
Models: the fixtures in ../shared/fixtures/hf (vocab 512) and the real models that
scripts/get-model fetches (models/ must hold them; missing ones are skipped with a note).
Usage: pip install tokenizers gguf numpy; scripts/get-model all; python3 tools/gen_tokenizer_refs.py
Made with tokenizers 0.23.3 and gguf 0.19.0.
"""
import os
import sys

import gguf
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.environ.get('AKUNU_FIXTURES', os.path.join(ROOT, '..', 'shared', 'fixtures', 'hf'))
OUT = os.path.join(ROOT, 'tests', 'data', 'tokenizer_refs')

CONTRACTIONS_CI = "'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]"
PRE_REGEX = {
    'gpt2': r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
    'llama3': "(?:" + CONTRACTIONS_CI + r")|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    'qwen2': "(?:" + CONTRACTIONS_CI + r")|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
}
PRE_ALIAS = {'default': 'gpt2', 'gpt2': 'gpt2', 'llama-bpe': 'llama3', 'llama3': 'llama3', 'qwen2': 'qwen2',
             'smollm': 'smollm'}


def pre_tokenizer(pre):
    if pre == 'smollm':
        return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(PRE_REGEX[pre]), behavior='isolated'),
                                    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])


def read_gguf(path):
    r = gguf.GGUFReader(path)

    def val(key, default=None):
        f = r.fields.get(key)
        if f is None:
            return default
        if f.types[0] == gguf.GGUFValueType.ARRAY:
            return [f.contents(i) for i in range(len(f.data))]
        return f.contents()
    return val


def add_specials(tok, tokens, types):
    special = [AddedToken(t, special=True, normalized=False) for t, k in zip(tokens, types) if k in (2, 3) and t]
    user = [AddedToken(t, special=False, normalized=False) for t, k in zip(tokens, types) if k == 4 and t]
    tok.add_special_tokens(special)
    tok.add_tokens(user)


def build_spm(val):
    tokens, scores, types = val('tokenizer.ggml.tokens'), val('tokenizer.ggml.scores'), val('tokenizer.ggml.token_type')
    prefix = val('tokenizer.ggml.add_space_prefix', True)
    vocab = {t: i for i, t in enumerate(tokens)}
    mergeable = lambda i: types[i] in (1, 5)
    merges = []
    for i, t in enumerate(tokens):
        if not mergeable(i) or len(t) < 2 or vocab[t] != i:
            continue
        for k in range(1, len(t)):
            a, b = vocab.get(t[:k]), vocab.get(t[k:])
            if a is not None and b is not None and mergeable(a) and mergeable(b):
                merges.append((-scores[i], i, k))
    merges.sort()
    merges = [(tokens[i][:k], tokens[i][k:]) for _, i, k in merges]
    unk = next((t for t, k in zip(tokens, types) if k == 2), None)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, byte_fallback=True, unk_token=unk, fuse_unk=True))
    norm = [normalizers.Replace(' ', '\u2581')]
    if prefix:
        norm.insert(0, normalizers.Prepend('\u2581'))
    tok.normalizer = normalizers.Sequence(norm)
    tok.decoder = decoders.Sequence([decoders.Replace('\u2581', ' '), decoders.ByteFallback(), decoders.Fuse()])
    add_specials(tok, tokens, types)
    return tok


def build_bpe(val, pre=None):
    tokens, types = val('tokenizer.ggml.tokens'), val('tokenizer.ggml.token_type')
    pre = PRE_ALIAS[pre or val('tokenizer.ggml.pre', 'default')]
    vocab = {t: i for i, t in enumerate(tokens)}
    merges = [tuple(m.split(' ', 1)) for m in val('tokenizer.ggml.merges')]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=(pre == 'llama3')))
    tok.pre_tokenizer = pre_tokenizer(pre)
    tok.decoder = decoders.ByteLevel()
    add_specials(tok, tokens, types)
    return tok


def build_wpm(val):
    tokens, types = val('tokenizer.ggml.tokens'), val('tokenizer.ggml.token_type')
    lower = val('tokenizer.ggml.normalizer.lowercase', True)
    hf = [t if k == 3 else t[1:] if t.startswith('\u2581') else '##' + t for t, k in zip(tokens, types)]
    vocab = {t: i for i, t in enumerate(hf)}
    tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token='[UNK]', max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, lowercase=lower)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    add_specials(tok, tokens, types)
    return tok


def make_wpm_gguf(lines, path):
    specials = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']
    tok = Tokenizer(models.WordPiece(unk_token='[UNK]'))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(lines, trainers.WordPieceTrainer(vocab_size=800, special_tokens=specials))
    inv = sorted((i, t) for t, i in tok.get_vocab().items())
    tokens = [t if t in specials else t[2:] if t.startswith('##') else '\u2581' + t for _, t in inv]
    w = gguf.GGUFWriter(path, 'bert')
    w.add_tokenizer_model('bert')
    w.add_token_list(tokens)
    w.add_token_types([3 if t in specials else 1 for t in tokens])
    w.add_bos_token_id(2)
    w.add_eos_token_id(3)
    w.add_unk_token_id(1)
    w.add_sep_token_id(3)
    w.add_pad_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(True)
    w.add_bool('tokenizer.ggml.normalizer.lowercase', True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def corpus_lines():
    data = open(os.path.join(ROOT, 'tests', 'data', 'tokenizer_corpus.txt'), 'rb').read()
    lines = data.split(b'\n')
    if lines and lines[-1] == b'':
        lines.pop()
    return data.decode('utf-8'), [l.decode('utf-8') for l in lines]


def write_ids(name, tok, whole, lines, raw=True):
    def enc(s):
        return ' '.join(str(i) for i in tok.encode(s, add_special_tokens=False).ids)
    tok.encode_special_tokens = False
    with open(os.path.join(OUT, name + '.ids'), 'w') as f:
        f.writelines(enc(s) + '\n' for s in lines)
    with open(os.path.join(OUT, name + '.whole.ids'), 'w') as f:
        f.write(enc(whole) + '\n')
    if raw:
        tok.encode_special_tokens = True
        with open(os.path.join(OUT, name + '.raw.ids'), 'w') as f:
            f.writelines(enc(s) + '\n' for s in lines)
        tok.encode_special_tokens = False
    print('wrote', name, file=sys.stderr)


def write_splits(lines):
    for pre in ('gpt2', 'llama3', 'qwen2', 'smollm'):
        p = pre_tokenizer(pre)
        with open(os.path.join(OUT, 'split-%s.txt' % pre), 'w') as f:
            for s in lines:
                ends = []
                for piece, (a, b) in p.pre_tokenize_str(s):
                    ends.append(len(s[:b].encode('utf-8')))
                f.write(' '.join(map(str, ends)) + '\n')


def main():
    os.makedirs(OUT, exist_ok=True)
    whole, lines = corpus_lines()
    write_splits(lines)
    make_wpm_gguf(lines, os.path.join(OUT, 'wpm-vocab.gguf'))
    jobs = [
        ('bert-fixture', os.path.join(FIX, 'bert', 'bert-f32.gguf'), None),
        ('wpm', os.path.join(OUT, 'wpm-vocab.gguf'), None),
        ('llama-fixture', os.path.join(FIX, 'llama', 'llama-f32.gguf'), None),
        ('gemma3-fixture', os.path.join(FIX, 'gemma3', 'gemma3-f32.gguf'), None),
        ('smollm2', os.path.join(ROOT, 'models', 'SmolLM2-135M-Instruct.Q4_1.gguf'), None),
        ('smollm2-llama3', os.path.join(ROOT, 'models', 'SmolLM2-135M-Instruct.Q4_1.gguf'), 'llama-bpe'),
        ('smollm2-qwen2', os.path.join(ROOT, 'models', 'SmolLM2-135M-Instruct.Q4_1.gguf'), 'qwen2'),
        ('gemma3-270m', os.path.join(ROOT, 'models', 'gemma-3-270m-q4_k_m.gguf'), None),
    ]
    for name, path, pre in jobs:
        if not os.path.exists(path):
            print('skip %s: %s missing' % (name, path), file=sys.stderr)
            continue
        val = read_gguf(path)
        model = val('tokenizer.ggml.model')
        tok = build_spm(val) if model == 'llama' else build_wpm(val) if model == 'bert' else build_bpe(val, pre)
        write_ids(name, tok, whole, lines, raw=pre is None)


if __name__ == '__main__':
    main()
