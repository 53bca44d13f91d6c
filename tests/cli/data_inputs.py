"""Writes the inputs of tests/cli/data_inputs.sh and checks what `atoll data prepare` made of them.

  data_inputs.py write DIR          the same documents as text files (DIR/docs/), JSONL (.jsonl,
                                    .jsonl.gz, .jsonl.zst) and Parquet (several row groups); and
                                    DIR/large.jsonl.zst, 14 MB of documents of 64 bytes to 2.4 MB
  data_inputs.py llama3 OUT         OUT's train shards are Llama 3's tokenizer (Meta's, from
                                    llama-models) on each train document of OUT/train.txt, after
                                    <|begin_of_text|>
"""
import gzip
import json
import pathlib
import sys

# Normalized text (no trailing spaces, no blank line runs), with the hard cases of UTF-8.
DOCUMENTS = [
    f"Document {i}: h\u00e9llo w\u00f6rld \U0001F600 \u4e2d\u6587 {'x' * (i % 7)}.\n"
    f"It's line two of {i}; digits 1234567 and tabs\there.\n\nA second paragraph {i * i}."
    for i in range(60)
]


def write(out):
    import pyarrow
    import pyarrow.parquet
    import zstandard

    out = pathlib.Path(out)
    (out / "docs").mkdir(parents=True)
    for i, text in enumerate(DOCUMENTS):
        (out / "docs" / f"{i:03d}.txt").write_text(text + "\n", encoding="utf-8")
    lines = "".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(DOCUMENTS)).encode()
    (out / "c.jsonl").write_bytes(lines)
    (out / "c.jsonl.gz").write_bytes(gzip.compress(lines))
    # Two frames, as a file compressed in parts (or zstd's --long streaming) has.
    half = len(lines) // 2
    frames = zstandard.ZstdCompressor().compress(lines[:half]) + zstandard.ZstdCompressor().compress(lines[half:])
    (out / "c.jsonl.zst").write_bytes(frames)
    table = pyarrow.table({"id": list(range(len(DOCUMENTS))), "content": DOCUMENTS})
    pyarrow.parquet.write_table(table, out / "c.parquet", row_group_size=8)
    # Encoding units of about 1 MB and three of 2.4 MB, which the units after them overtake on 2
    # threads; more text than 2 threads hold in flight (8 MB).
    large = []
    for i in range(1500):
        lines = 60000 if i % 500 == 7 else 2 + i * 37 % 180
        large.append("".join(f"line {j} of document {i}: value {j * i % 997} \u00e9\n" for j in range(lines)))
    records = "".join(json.dumps({"text": t}) + "\n" for t in large).encode()
    (out / "large.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(records))


def llama3(out):
    import numpy
    import llama_models.llama3
    from llama_models.llama3.tokenizer import Tokenizer

    tokenizer = Tokenizer(pathlib.Path(llama_models.llama3.__file__).parent / "tokenizer.model")
    out = pathlib.Path(out)
    expected = []
    train_text = (out / "train.txt").read_text(encoding="utf-8")
    for text in DOCUMENTS:
        if text in train_text:
            expected += tokenizer.encode(text, bos=True, eos=False)
    shards = sorted(out.glob("train*.bin"))
    tokens = []
    for shard in shards:
        header = numpy.fromfile(shard, dtype=numpy.int32, count=3)
        body = numpy.fromfile(shard, dtype=numpy.uint32, offset=1024)
        assert header[0] == 20240801 and header[2] == len(body), (shard, header, len(body))
        tokens += body.tolist()
    if tokens != expected:
        first = next((i for i, (a, b) in enumerate(zip(tokens, expected)) if a != b), min(len(tokens), len(expected)))
        sys.exit(f"llama3: {len(tokens)} tokens in {out}, Meta's tokenizer gives {len(expected)}; first difference at {first}")


if __name__ == "__main__":
    {"write": write, "llama3": llama3}[sys.argv[1]](sys.argv[2])
