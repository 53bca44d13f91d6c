"""Megatron's .bin/.idx read by Atoll as megatron-core reads them.

Files written by megatron-core's own IndexedDatasetBuilder (uint16 and int32 tokens, documents of
one or several items, an empty document) are read by its IndexedDataset and by Atoll's reader
(tests/interop/atoll_read_shard.cpp): the same tokens in the same order, and Atoll's document
starts are where megatron-core's document index says documents start.

usage: megatron_check.py ATOLL_READ_SHARD
"""

import logging
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np

warnings.filterwarnings("ignore")  # megatron-core warns that Transformer Engine and Apex are absent
logging.disable(logging.WARNING)
import torch  # noqa: E402
from megatron.core.datasets.indexed_dataset import IndexedDataset, IndexedDatasetBuilder  # noqa: E402


def write(prefix, dtype, documents):
    """Each document a list of items (lists of ids); [] is an empty document."""
    builder = IndexedDatasetBuilder(prefix + ".bin", dtype=dtype)
    for items in documents:
        for item in items:
            builder.add_item(torch.tensor(item, dtype=torch.int64))
        builder.end_document()
    builder.finalize(prefix + ".idx")


def megatron_view(prefix):
    dataset = IndexedDataset(prefix)
    tokens = np.concatenate([dataset[i] for i in range(len(dataset))]).astype(np.int64)
    itemsize = dataset.index.dtype_size
    starts = sorted({int(dataset.index.sequence_pointers[s]) // itemsize
                     for s in dataset.document_indices[:-1] if s < len(dataset)})
    return tokens, starts


def atoll_view(tool, prefix, work):
    out = os.path.join(work, "atoll.txt")
    subprocess.run([tool, prefix + ".bin", out], check=True)
    with open(out) as f:
        count = int(f.readline().split()[1])
        starts = [int(s) for s in f.readline().split()[1:]]
        f.readline()
        tokens = np.array([int(line) for line in f], dtype=np.int64)
    assert len(tokens) == count, (len(tokens), count)
    return tokens, starts


def main():
    tool = sys.argv[1]
    rng = np.random.default_rng(61)
    cases = {
        "uint16": (np.uint16, 65535),
        "int32": (np.int32, 128256),  # Llama 3's vocabulary: ids past uint16
    }
    failures = 0
    with tempfile.TemporaryDirectory(prefix="atoll-megatron-") as work:
        for name, (dtype, vocab) in cases.items():
            documents = []
            for d in range(40):
                items = [rng.integers(0, vocab, size=int(rng.integers(1, 60))).tolist()
                         for _ in range(int(rng.integers(1, 4)))]
                documents.append(items)
                if d == 17:
                    documents.append([])  # an empty document: its start is the next one's
            prefix = os.path.join(work, name)
            write(prefix, dtype, documents)
            theirs_tokens, theirs_starts = megatron_view(prefix)
            ours_tokens, ours_starts = atoll_view(tool, prefix, work)
            same_tokens = np.array_equal(theirs_tokens, ours_tokens)
            same_starts = theirs_starts == ours_starts
            print(f"{name}: {len(ours_tokens)} tokens, {len(ours_starts)} document starts: "
                  f"tokens {'equal' if same_tokens else 'DIFFER'}, starts {'equal' if same_starts else 'DIFFER'}")
            if not (same_tokens and same_starts):
                failures += 1
                print(f"  megatron starts {theirs_starts[:10]}..., atoll {ours_starts[:10]}...")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
