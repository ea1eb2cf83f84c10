#!/usr/bin/env python3
"""Writes the Brown corpus minus every document that the genre task's dev or
test split draws passages from, so pretraining never sees held-out text.

usage: brown_pretrain_corpus.py BROWN_DIR OUT.txt
BROWN_DIR holds brown.txt (one sentence a line, a blank line between
documents) and genre/{train,dev,test}.tsv (sentence<TAB>label, passages of
consecutive sentences joined by spaces).
"""
import sys

brown_dir, out_path = sys.argv[1], sys.argv[2]
docs, cur = [], []
for line in open(f"{brown_dir}/brown.txt", encoding="utf-8"):
    line = line.rstrip("\n")
    if line.strip():
        cur.append(line)
    elif cur:
        docs.append(cur)
        cur = []
if cur:
    docs.append(cur)

line_doc = {}
for i, d in enumerate(docs):
    for line in d:
        line_doc.setdefault(line.strip(), i)


def doc_of(passage):
    # A passage starts with one of the document's lines: try every prefix
    # that ends before a space.
    for j in range(len(passage) + 1):
        if j == len(passage) or passage[j] == " ":
            d = line_doc.get(passage[:j].strip())
            if d is not None:
                return d
    return None


held, unmatched = set(), 0
for split in ("dev", "test"):
    with open(f"{brown_dir}/genre/{split}.tsv", encoding="utf-8") as f:
        next(f)
        for row in f:
            passage = row.rstrip("\n").rsplit("\t", 1)[0]
            d = doc_of(passage)
            if d is None:
                unmatched += 1
            else:
                held.add(d)

kept = [d for i, d in enumerate(docs) if i not in held]
with open(out_path, "w", encoding="utf-8") as f:
    f.write("\n\n".join("\n".join(d) for d in kept) + "\n")
print(f"documents {len(docs)}, held out {len(held)}, kept {len(kept)}, "
      f"unmatched passages {unmatched}")
