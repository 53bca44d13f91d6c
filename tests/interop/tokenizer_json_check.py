"""A Hugging Face tokenizer.json in Atoll against the tokenizers package, id for id: the file
transformers' converter (TikTokenConverter) writes from Llama 3's tokenizer.model with Meta's split
pattern and special tokens, read by Atoll and by tokenizers.Tokenizer.from_file, encoding with
encode_special_tokens (text spelling a special token is text) and without the post-processor
(add_special_tokens=False), on tokenizer_corpus.py's documents. Decoding round-trips (checked by the
tool); text that is not UTF-8 is refused.
usage: tokenizer_json_check.py ATOLL_TOKENIZE_BIN
"""

import sys
import tempfile
from pathlib import Path

import tokenizers
from llama_models.llama3.tokenizer import Tokenizer
from transformers.convert_slow_tokenizer import TikTokenConverter

from tiktoken_check import MODEL
from tokenizer_corpus import check


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
              f"tokenizers {tokenizers.__version__} on {MODEL.parent.name}/{MODEL.name} converted")


if __name__ == "__main__":
    main()
