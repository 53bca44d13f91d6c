"""Llama 3's tokenizer: Atoll's encoder (build/bin/bench_tokenizer) against tiktoken's, one thread
each, on the same ~1.7 MB of English (tests/interop/tokenizer_corpus.py's: Python's reference topics,
its standard modules' docstrings and Debian's common licenses) in the same run. Prints both rates in tokens/s and the ratio; never fails
for being slow, only if the two disagree on the token count.
usage: .venv/bin/python bench/bench_tokenizer.py [BENCH_BIN=build/bin/bench_tokenizer] [REPEATS=5]
"""

import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "interop"))
from tiktoken_check import MODEL  # noqa: E402
from tokenizer_corpus import english_text  # noqa: E402
from llama_models.llama3.tokenizer import Tokenizer  # noqa: E402
import tiktoken  # noqa: E402


def main():
    bench = sys.argv[1] if len(sys.argv) > 1 else "build/bin/bench_tokenizer"
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    text = english_text()
    encoding = Tokenizer(MODEL).model
    best, tokens = float("inf"), 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        tokens = len(encoding.encode_ordinary(text))
        best = min(best, time.perf_counter() - t0)
    reference = tokens / best
    with tempfile.NamedTemporaryFile(suffix=".txt") as file:
        file.write(text.encode("utf-8"))
        file.flush()
        line = subprocess.run([bench, str(MODEL), file.name, str(repeats)], check=True, capture_output=True,
                              text=True).stdout.strip()
    atoll_tokens, atoll = int(line.split()[1]), float(line.split()[-2])
    if atoll_tokens != tokens:
        sys.exit(f"token counts differ: tiktoken {tokens}, {line}")
    print(f"text: {len(text.encode('utf-8'))} bytes, {tokens} tokens; best of {repeats}, one thread")
    print(f"tiktoken {tiktoken.__version__}: {reference:,.0f} tokens/s")
    print(f"atoll:           {atoll:,.0f} tokens/s")
    print(f"ratio: {atoll / reference:.2f}x tiktoken")


if __name__ == "__main__":
    main()
