"""Llama 3's tokenizer: Atoll's encoders (build/bin/bench_tokenizer) against the references, one
thread each, on the same ~1.7 MB of English (tests/interop/tokenizer_corpus.py's: Python's reference
topics, its standard modules' docstrings and Debian's common licenses) in the same run: Atoll on
tokenizer.model against tiktoken, Atoll on the tokenizer.json transformers' converter writes from it
against tokenizers. Prints rates in tokens/s and the ratios; never fails for being slow, only if
the token counts disagree.
usage: .venv/bin/python bench/bench_tokenizer.py [BENCH_BIN=build/bin/bench_tokenizer] [REPEATS=5]
"""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ["RAYON_NUM_THREADS"] = "1"  # tokenizers: one thread, as the others
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "interop"))
from tiktoken_check import MODEL  # noqa: E402
from tokenizer_corpus import english_text  # noqa: E402
from llama_models.llama3.tokenizer import Tokenizer  # noqa: E402
from transformers.convert_slow_tokenizer import TikTokenConverter  # noqa: E402
import tiktoken  # noqa: E402
import tokenizers  # noqa: E402


def best_rate(encode, repeats):
    best, tokens = float("inf"), 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        tokens = len(encode())
        best = min(best, time.perf_counter() - t0)
    return tokens, tokens / best


def atoll_rate(bench, model, text_path, repeats):
    line = subprocess.run([bench, str(model), str(text_path), str(repeats)], check=True, capture_output=True,
                          text=True).stdout.strip()
    return int(line.split()[1]), float(line.split()[-2])


def main():
    bench = sys.argv[1] if len(sys.argv) > 1 else "build/bin/bench_tokenizer"
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    text = english_text()
    meta = Tokenizer(MODEL)
    with tempfile.TemporaryDirectory() as work:
        text_path, json_path = Path(work) / "text.txt", Path(work) / "tokenizer.json"
        text_path.write_bytes(text.encode("utf-8"))
        specials = sorted(meta.special_tokens, key=meta.special_tokens.get)
        TikTokenConverter(vocab_file=str(MODEL), pattern=meta.pat_str,
                          extra_special_tokens=specials).converted().save(str(json_path))
        hf = tokenizers.Tokenizer.from_file(str(json_path))
        hf.encode_special_tokens = True
        rows = [
            (f"tiktoken {tiktoken.__version__}", *best_rate(lambda: meta.model.encode_ordinary(text), repeats)),
            ("atoll, tokenizer.model", *atoll_rate(bench, MODEL, text_path, repeats)),
            (f"tokenizers {tokenizers.__version__}",
             *best_rate(lambda: hf.encode(text, add_special_tokens=False).ids, repeats)),
            ("atoll, tokenizer.json", *atoll_rate(bench, json_path, text_path, repeats)),
        ]
    if len({tokens for _, tokens, _ in rows}) != 1:
        sys.exit(f"token counts differ: {rows}")
    print(f"text: {len(text.encode('utf-8'))} bytes, {rows[0][1]} tokens; best of {repeats}, one thread each")
    for name, _, rate in rows:
        print(f"{name:24} {rate:>12,.0f} tokens/s")
    print(f"ratio: {rows[1][2] / rows[0][2]:.2f}x tiktoken (tokenizer.model), "
          f"{rows[3][2] / rows[2][2]:.2f}x tokenizers (tokenizer.json)")


if __name__ == "__main__":
    main()
