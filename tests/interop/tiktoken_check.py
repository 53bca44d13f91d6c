"""Llama 3's tokenizer in Atoll against the real one, id for id: tiktoken's Encoding built as Meta's
tokenizer.py in llama-models builds it (its tokenizer.model, split pattern and special tokens),
encoding as Meta's Tokenizer.encode does by default (text spelling a special token is ordinary
text), on tokenizer_corpus.py's hard cases, every code point in contexts that expose its Unicode
class, and ~1.7 MB of real English; Atoll's decode must give each text back (checked by the tool),
bos/eos/vocab must be Meta's. Text that is not UTF-8 has no str for tiktoken to encode: Atoll must
refuse exactly those documents.
usage: tiktoken_check.py ATOLL_TOKENIZE_BIN
"""

import sys
from pathlib import Path

import llama_models.llama3
import tiktoken
from llama_models.llama3.tokenizer import Tokenizer

from tokenizer_corpus import check, documents, every_code_point_probes

MODEL = Path(llama_models.llama3.__file__).parent / "tokenizer.model"


def main():
    meta = Tokenizer(MODEL)
    check(sys.argv[1], MODEL, lambda text: meta.model.encode(text, allowed_special=set(), disallowed_special=()),
          f"bos {meta.bos_id}, eos {meta.eos_id}, vocab {meta.n_words}",
          f"tiktoken {tiktoken.__version__} on {MODEL.parent.name}/{MODEL.name}",
          documents(list(every_code_point_probes())))


if __name__ == "__main__":
    main()
