"""A Hugging Face tokenizer.json in Atoll against the tokenizers package, id for id: the file
transformers' converter (TikTokenConverter) writes from Llama 3's tokenizer.model with Meta's split
pattern and special tokens, read by Atoll and by tokenizers.Tokenizer.from_file, encoding with
encode_special_tokens (text spelling a special token is text) and without the post-processor
(add_special_tokens=False), on tokenizer_corpus.py's hard cases and English text and on every token of
the vocabulary that is UTF-8 text by itself (126,648 of 128,000), each its own document: each merge
of the tokenizer.json's merge list, where a wrong merge order or byte-level mapping gives other ids.
The pre-tokenizer split is the same code as the tiktoken path's, checked on every code point by
tiktoken_check.py. Decoding round-trips (checked by the tool); text that is not UTF-8 is refused.
usage: tokenizer_json_check.py ATOLL_TOKENIZE_BIN
"""

import sys
import tempfile
from pathlib import Path

import tokenizers
from llama_models.llama3.tokenizer import Tokenizer
from transformers.convert_slow_tokenizer import TikTokenConverter

from tiktoken_check import MODEL
from tokenizer_corpus import check, documents


def vocabulary_probes(encoding, specials):
    """Every ordinary token's text, where its bytes are UTF-8."""
    probes = []
    for token in range(encoding.n_vocab - specials):
        try:
            probes.append(encoding.decode_single_token_bytes(token).decode("utf-8"))
        except UnicodeDecodeError:
            pass
    return probes


def main():
    meta = Tokenizer(MODEL)
    specials = sorted(meta.special_tokens, key=meta.special_tokens.get)
    with tempfile.TemporaryDirectory() as work:
        path = Path(work) / "tokenizer.json"
        TikTokenConverter(vocab_file=str(MODEL), pattern=meta.pat_str, extra_special_tokens=specials).converted().save(
            str(path))
        hf = tokenizers.Tokenizer.from_file(str(path))
        hf.encode_special_tokens = True
        check(sys.argv[1], path, lambda text: hf.encode(text, add_special_tokens=False).ids,
              f"bos {meta.bos_id}, eos {meta.eos_id}, vocab {hf.get_vocab_size(with_added_tokens=True)}",
              f"tokenizers {tokenizers.__version__} on {MODEL.parent.name}/{MODEL.name} converted",
              documents(vocabulary_probes(meta.model, len(specials))))


if __name__ == "__main__":
    main()
