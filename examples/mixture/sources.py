"""The two sources of examples/mixture/prepare.sh, from files Debian installed on this machine (no
download): Debian's package documentation (/usr/share/doc: READMEs, NEWS, changelogs, copyright files,
gzip ones decompressed) as Parquet, one row per file (columns package, path, text; row groups of
256), and C headers (/usr/include/**/*.h) as JSONL compressed with Zstandard, one line per file
(fields path, text). Files that are not UTF-8 or are empty are left out and counted; the order is
sorted by path, so the same machine gives the same bytes.

Usage: sources.py OUT_DIR   (writes OUT_DIR/debian-docs.parquet and OUT_DIR/headers.jsonl.zst)
"""
import gzip
import json
import pathlib
import sys

import pyarrow
import pyarrow.parquet
import zstandard


def texts(paths):
    """(path, text) of each UTF-8, non-empty file; the count of those left out."""
    kept, left_out = [], 0
    for path in paths:
        data = path.read_bytes()
        if path.suffix == ".gz":
            try:
                data = gzip.decompress(data)
            except OSError:
                left_out += 1
                continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            left_out += 1
            continue
        if not text.strip() or "\0" in text:
            left_out += 1
            continue
        kept.append((str(path), text))
    return kept, left_out


def main(out):
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    docs = sorted(p for p in pathlib.Path("/usr/share/doc").rglob("*")
                  if p.is_file() and not p.is_symlink() and p.suffix in ("", ".gz", ".txt", ".md", ".rst", ".Debian"))
    rows, left_docs = texts(docs)
    table = pyarrow.table({
        "package": [p.split("/")[4] for p, _ in rows],
        "path": [p for p, _ in rows],
        "text": [t for _, t in rows],
    })
    pyarrow.parquet.write_table(table, out / "debian-docs.parquet", row_group_size=256)
    headers = sorted(p for p in pathlib.Path("/usr/include").rglob("*.h") if p.is_file())
    code, left_code = texts(headers)
    with open(out / "headers.jsonl.zst", "wb") as f, zstandard.ZstdCompressor(level=10).stream_writer(f) as z:
        for path, text in code:
            z.write((json.dumps({"path": path, "text": text}) + "\n").encode())
    print(f"sources: {len(rows)} documentation files as Parquet ({left_docs} left out), "
          f"{len(code)} headers as JSONL.zst ({left_code} left out) in {out}")


if __name__ == "__main__":
    main(sys.argv[1])
