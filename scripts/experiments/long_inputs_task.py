#!/usr/bin/env python3
"""Builds the "late label" task of scripts/experiments/long_inputs.sh.

From the bundled 4-genre sample (data/sample/genre_{train,dev,test}.tsv):
every example is

    filler (64 words) + target passage (at most 40 words) + filler (70 words)

where the target is a romance or learned passage and its genre is the
label (binary), and the fillers are press_reportage and religion passages
of the same split, cut to a word count. Every word is at least one
SentencePiece piece, so the target starts after at least 64 tokens: a
model that reads only the first 64 tokens sees fillers only. Each split's
passages stay in that split. Targets shorter than 15 words are not used.

usage: long_inputs_task.py OUT_DIR [--variants_train 2 --variants_eval 3]
Writes OUT_DIR/{train,dev,test}.tsv (columns sentence, label).
"""
import argparse
import csv
import os
import random

GENRES = ("learned", "romance")   # the labels
FILLERS = ("press_reportage", "religion")
HEAD_WORDS = 64
TARGET_WORDS = 40
TAIL_WORDS = 70
MIN_TARGET_WORDS = 15


def read(path):
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t", quotechar=None))
    header = rows[0]
    text, label = header.index("sentence"), header.index("label")
    return [(r[text], r[label]) for r in rows[1:]]


def filler(words_pool, rng, n):
    out = []
    while len(out) < n:
        out.extend(rng.choice(words_pool))
    return out[:n]


def build(rows, variants, rng):
    fill = [t.split() for t, g in rows if g in FILLERS]
    targets = [(t.split(), g) for t, g in rows
               if g in GENRES and len(t.split()) >= MIN_TARGET_WORDS]
    out = []
    for words, genre in targets:
        for _ in range(variants):
            text = (filler(fill, rng, HEAD_WORDS) + words[:TARGET_WORDS] +
                    filler(fill, rng, TAIL_WORDS))
            out.append((" ".join(text), genre))
    rng.shuffle(out)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--sample", default=os.path.join(
        os.path.dirname(__file__), "..", "..", "data", "sample"))
    ap.add_argument("--variants_train", type=int, default=2)
    ap.add_argument("--variants_eval", type=int, default=3)
    ap.add_argument("--seed", type=int, default=16)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = random.Random(args.seed)
    for split in ("train", "dev", "test"):
        rows = read(os.path.join(args.sample, "genre_%s.tsv" % split))
        n = args.variants_train if split == "train" else args.variants_eval
        examples = build(rows, n, rng)
        with open(os.path.join(args.out, split + ".tsv"), "w",
                  encoding="utf-8") as f:
            f.write("sentence\tlabel\n")
            for text, label in examples:
                f.write("%s\t%s\n" % (text, label))
        print("%s: %d examples" % (split, len(examples)))


if __name__ == "__main__":
    main()
