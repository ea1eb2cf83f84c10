"""Writes a corpus of at least SIZE_MB megabytes from the bundled sample:
its documents (blank-line separated) repeated, reshuffled for every copy
with a fixed seed, so no two copies are in the same order. Used by
bench/corpus_scale.sh and bench/startup_scale.sh.

    python3 bench/make_corpus.py OUT SIZE_MB SAMPLE
"""
import random
import sys


def main():
    path, size_mb, sample = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    docs = [d.strip("\n") for d in open(sample, encoding="utf-8").read().split("\n\n")
            if d.strip()]
    rng = random.Random(1234)
    target = size_mb * 1000000
    written = 0
    with open(path, "w", encoding="utf-8") as f:
        while written < target:
            order = list(range(len(docs)))
            rng.shuffle(order)
            block = "".join(docs[i] + "\n\n" for i in order)
            f.write(block)
            written += len(block.encode("utf-8"))


if __name__ == "__main__":
    main()
