"""The corpus Atoll's tokenizers are checked on against the reference libraries (tiktoken_check.py,
tokenizer_json_check.py), and the check itself: Atoll's ids (the atoll_tokenize tool) equal to the
reference's for every document, text that is not UTF-8 refused.
"""

import ast
import glob
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

from pydoc_data.topics import topics

REFUSED = 0xFFFFFFFF

HARD_CASES = [
    "",
    "Hello, world! How's it going?\n",
    # CJK, Hangul, kana; emoji (4-byte, ZWJ sequences, skin tones, flags) and other 4-byte UTF-8
    "日本語のテキスト、中文文本。한국어 텍스트 カタカナ",
    "Hi 👋🏽 family 👨‍👩‍👧‍👦 flag 🇫🇷 🙂🙂🙂 math 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝟙𝟚𝟛 CJK-B 𠜎𠜱 Gothic 𐌰𐌱𐌲",
    # combining marks: after letters, alone, stacked; Indic, Arabic and Thai marks
    "e\u0301 cafe\u0301 a\u0308\u0304 \u0301alone Z\u0351\u036b\u0343a\u0310\u0357l\u0300g\u0301o नमस्ते مَرْحَبًا สวัสดี",
    # contractions in both cases, and near misses; U+017F folds to s in the pattern's (?i:)
    "it's IT'S they're THEY'RE we'll WE'LL I've I'VE I'm I'M he'd HE'D don't DON'T 'S 'RE 'Ll 'sTART",
    "'s's ''s x'x ' 's '' 'ſ Iſ 'r 're're 'lL 'LL 'Ve 'dD 'M' 't'",
    # a contraction takes two or three letters of a word, the rest is a word of its own
    "'START 'Tis 'REALLY 'VEry 'LLama 'Dog 'Mom 'stop 'really 'ſtop Iſ'ſt",
    # runs of spaces, tabs, newlines, CR LF, other White_Space
    "a  b   c    d\t\te\n\n\nf \n \n g\r\n\r\nh   \t \n  i\r\r\rj \r\n k",
    "   leading and trailing   ",
    "   ",
    "\n",
    "\t \t",
    " \n",
    "x \u3000\u3000y\u00a0z\u2003\u2003w\u0085v\u2028u\u2029t\x0b\x0cs",
    "\x1c\x1d\x1e\x1f are not White_Space",
    "    def f(x):\n        return x  # comment\n\n\n    \n",
    # digit runs longer than three, other numbers
    "1 12 123 1234 12345 123456789012 3.14159 1,000,000 -42 x1234y",
    "١٢٣٤٥ ௧௨௩௪ ½¾ Ⅻⅻ ①②③④ 𝟘𝟙𝟚𝟛𝟜",
    # text that spells special tokens
    "<|begin_of_text|>Hello<|end_of_text|> <|eot_id|> <|start_header_id|>user<|end_header_id|>",
    "<|reserved_special_token_250|><|image|><|python_tag|><|begin_of_text|>",
    # pieces of 100 bytes and more (tiktoken merges those with a heap)
    "a" * 300,
    "=-" * 200,
    "🙂" * 60,
    "字" * 120,
    "Lorem" + "ipsum" * 40 + " " + "\n" * 150 + " " * 150 + "x",
    "aGVsbG8gd29ybGQ" * 20 + "==",
    "https://example.com/a/very/long/path/that/keeps/going/" + "segment/" * 30 + "?q=1&r=2",
    # controls, replacement character, noncharacters, private use
    "\x00\x01\x7f \ufffd \ufffe \uffff \ue000 \U0010fffd",
]

INVALID_UTF8 = [b"\xff", b"abc\x80def", b"\xc3\x28", b"\xc0\xaf", b"\xed\xa0\x80", b"caf\xc3",
                b"\xf4\x90\x80\x80", b"ok then \xfe"]


def every_code_point_probes():
    """Each code point X (surrogates excepted: not in UTF-8) as "X1111 X's\\n": a number joins the
    digits, a letter takes the space and leaves "'s", White_Space and other characters split apart
    in their own ways; so a wrong Unicode class gives other ids."""
    cps = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    for i in range(0, len(cps), 8192):
        yield "".join(f"{chr(c)}1111 {chr(c)}'s\n" for c in cps[i:i + 8192])


def english_text():
    """~1.7 MB of real English: Python's reference topics (pydoc_data), the docstrings of Python's
    standard modules (both from Debian's libpython3.11-stdlib) and Debian's common licenses."""
    parts = [topics[k] for k in sorted(topics)]
    for path in sorted(glob.glob(os.path.join(os.path.dirname(os.__file__), "*.py"))):
        for node in ast.walk(ast.parse(Path(path).read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                parts.append(ast.get_docstring(node, clean=False) or "")
    seen = set()
    for path in sorted(glob.glob("/usr/share/common-licenses/*")):
        real = os.path.realpath(path)
        if real not in seen:
            seen.add(real)
            parts.append(Path(real).read_text(encoding="utf-8"))
    return "\n\n".join(part for part in parts if part)


def documents(probes):
    """The hard cases, `probes` (a list of documents that exercise one part of the tokenizer
    exhaustively) and the English text."""
    return HARD_CASES + probes + [english_text()]


def check(tool, model, reference, summary, reference_name, texts):
    """Runs `tool` on `model` over `texts` (documents(...)) and INVALID_UTF8; exits unless its ids
    equal reference(document) for each document, it refuses each non-UTF-8 one and its summary line
    holds `summary` (bos, eos, vocab)."""
    encoded = [d.encode("utf-8") for d in texts] + INVALID_UTF8
    for bad in INVALID_UTF8:
        try:
            bad.decode("utf-8")
            sys.exit(f"{bad!r} is UTF-8 after all; the corpus is wrong")
        except UnicodeDecodeError:
            pass
    with tempfile.TemporaryDirectory() as work:
        docs_path, ids_path = Path(work) / "docs.bin", Path(work) / "ids.bin"
        docs_path.write_bytes(b"".join(struct.pack("<I", len(d)) + d for d in encoded))
        run = subprocess.run([tool, str(model), str(docs_path), str(ids_path)], capture_output=True, text=True)
        sys.stdout.write(run.stdout + run.stderr)
        if run.returncode != 0:
            sys.exit(f"atoll_tokenize failed ({run.returncode})")
        ids_bytes = ids_path.read_bytes()
    if summary not in run.stdout:
        sys.exit(f"Atoll's tokenizer is not the reference's: wanted '{summary}' in '{run.stdout.strip()}'")

    at, failures, tokens = 0, 0, 0
    for index, document in enumerate(encoded):
        (count,) = struct.unpack_from("<I", ids_bytes, at)
        at += 4
        if index >= len(texts):
            if count != REFUSED:
                at += 4 * count
                failures += 1
                print(f"FAIL: {document!r} is not UTF-8 (the reference has no str to encode) but Atoll encoded it")
            continue
        if count == REFUSED:
            failures += 1
            print(f"FAIL: Atoll refused document {index}: {texts[index][:80]!r}")
            continue
        atoll = list(struct.unpack_from(f"<{count}I", ids_bytes, at))
        at += 4 * count
        want = reference(texts[index])
        tokens += len(want)
        if atoll != want:
            failures += 1
            first = next((i for i, (a, w) in enumerate(zip(atoll, want)) if a != w), min(len(atoll), len(want)))
            print(f"FAIL: document {index} ({len(texts[index])} chars, {texts[index][:60]!r}...): "
                  f"ids differ at {first} of {len(want)}\n  {reference_name}: {want[max(0, first - 3):first + 4]}"
                  f"\n  atoll: {atoll[max(0, first - 3):first + 4]}")
    if failures:
        sys.exit(f"{failures} of {len(encoded)} documents differ from {reference_name}")
    print(f"{len(texts)} documents ({tokens} tokens) equal to {reference_name}; "
          f"{len(INVALID_UTF8)} non-UTF-8 documents refused")
