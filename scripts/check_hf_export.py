#!/usr/bin/env python3
"""Loads an xlnet-export directory in HuggingFace transformers and checks it.

  check_hf_export.py MODEL_DIR [--tsv DEV.tsv --predictions RUN/predictions_dev.tsv]
                     [--device cpu|cuda] [--max_length N]

1. The class named in config.json's "architectures" loads the directory with
   from_pretrained: no missing, unexpected or mismatched weights.
2. The tokenizer loads with AutoTokenizer (tokenizer_config.json,
   special_tokens_map.json, spiece.model): an XLNet tokenizer whose special
   tokens are ours and which lowercases exactly when tokenizer_config.json's
   do_lower_case says (the ids of a mixed-case text equal spiece.model's ids
   of the text, lowercased for an uncased model).
3. With --tsv/--predictions (a sequence classifier): HF's predictions on the
   TSV's `sentence` column agree with xlnet-finetune's predictions file, row
   by row (at least --min_agreement). The inputs are the directory's
   spiece.model ids of the raw text, assembled as xlnet-finetune does
   (A <sep> <cls>, left-padded); xlnet-finetune also applies XLNet's text
   rules first (whitespace, quotes), which rarely changes the ids. The
   agreement when transformers' AutoTokenizer (its own normalisation) builds
   the batches is printed too, not checked.
Exits 1 when a check fails. Needs torch, transformers and sentencepiece.
"""
import argparse
import csv
import json
import os
import sys

import sentencepiece
import torch
import transformers

# XLNet's special ids (spiece.model as xlnet-data writes it, and official).
SEP_ID, CLS_ID, PAD_ID = 4, 3, 5


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
  ap.add_argument("model_dir")
  ap.add_argument("--tsv")
  ap.add_argument("--predictions")
  ap.add_argument("--device", default="cpu")
  ap.add_argument("--max_length", type=int, default=128,
                  help="the run's finetune.max_seq_length")
  ap.add_argument("--min_agreement", type=float, default=0.99)
  args = ap.parse_args()

  with open(os.path.join(args.model_dir, "config.json")) as f:
    config = json.load(f)
  arch = config["architectures"][0]
  model, info = getattr(transformers, arch).from_pretrained(
      args.model_dir, output_loading_info=True)
  problems = {k: v for k, v in info.items() if v}
  print(f"{args.model_dir}: {arch}, "
        f"{sum(p.numel() for p in model.parameters()):,} parameters, "
        f"transformers {transformers.__version__}, loading info "
        f"{problems or 'clean'}")
  if problems:
    return 1

  sp = sentencepiece.SentencePieceProcessor(
      model_file=os.path.join(args.model_dir, "spiece.model"))
  # The directory's tokenizer as a user loads it (spiece.model converted by
  # transformers; in transformers 5 XLNetTokenizer(vocab_file=...) ignores
  # the file and must not be used).
  tok = transformers.AutoTokenizer.from_pretrained(args.model_dir)
  with open(os.path.join(args.model_dir, "tokenizer_config.json")) as f:
    tok_config = json.load(f)
  uncased = tok_config["do_lower_case"]
  sample = "Hello World"
  got = tok(sample)["input_ids"]
  want = sp.encode(sample.lower() if uncased else sample) + [SEP_ID, CLS_ID]
  specials = {"sep": tok.sep_token, "cls": tok.cls_token,
              "pad": tok.pad_token, "mask": tok.mask_token}
  print(f"tokenizer {type(tok).__name__}, do_lower_case {uncased}, "
        f"special tokens {specials}; {sample!r} -> {got}")
  if ("XLNet" not in type(tok).__name__ or got != want or
      specials != {"sep": "<sep>", "cls": "<cls>", "pad": "<pad>",
                   "mask": "<mask>"}):
    print(f"tokenizer disagrees with spiece.model: expected {want}")
    return 1
  if not args.tsv:
    return 0
  with open(args.tsv, newline="") as f:
    rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
  with open(args.predictions, newline="") as f:
    ours = [r["prediction"] for r in
            csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)]
  if len(ours) != len(rows):
    print(f"{args.predictions}: {len(ours)} rows, {args.tsv}: {len(rows)}")
    return 1
  model.to(args.device).eval()
  id2label = {int(k): v for k, v in config["id2label"].items()}
  max_len = args.max_length
  print(f"tokenizer padding_side {tok.padding_side}; first row "
        f"{tok(rows[0]['sentence'])['input_ids'][-6:]} (last 6 ids)")

  def assembled(texts):
    # XLNet's classification input, as xlnet-finetune and the official code
    # build it: A <sep> <cls>, left-padded; segments 0, <cls> 2, padding 4.
    n = len(texts)
    ids = torch.full((n, max_len), PAD_ID, dtype=torch.long)
    seg = torch.full((n, max_len), 4, dtype=torch.long)
    mask = torch.zeros((n, max_len), dtype=torch.float)
    for b, text in enumerate(texts):
      a = sp.encode(text.lower() if uncased else text)[:max_len - 2]
      row = a + [SEP_ID, CLS_ID]
      ids[b, max_len - len(row):] = torch.tensor(row)
      seg[b, max_len - len(row):] = torch.tensor([0] * (len(a) + 1) + [2])
      mask[b, max_len - len(row):] = 1
    return {"input_ids": ids, "token_type_ids": seg, "attention_mask": mask}

  def predict(make_batch):
    out = []
    with torch.no_grad():
      for i in range(0, len(rows), 64):
        batch = make_batch([r["sentence"] for r in rows[i:i + 64]])
        batch = {k: v.to(args.device) for k, v in batch.items()}
        logits = model(**batch).logits
        out += [id2label[j] for j in logits.argmax(-1).tolist()]
    return out

  via_tokenizer = predict(lambda texts: tok(
      texts, padding=True, truncation=True, max_length=max_len,
      return_tensors="pt"))
  hf = predict(assembled)
  print("HF tokenizer's own batches agree with xlnet.cpp on "
        f"{sum(a == b for a, b in zip(via_tokenizer, ours)) / len(rows):.4f}")
  agree = sum(a == b for a, b in zip(hf, ours)) / len(rows)
  gold = [r.get("label") for r in rows]
  acc_hf = sum(a == g for a, g in zip(hf, gold)) / len(rows)
  acc_ours = sum(a == g for a, g in zip(ours, gold)) / len(rows)
  print(f"{args.tsv}: {len(rows)} rows, HF and xlnet.cpp predictions agree on "
        f"{agree:.4f}; accuracy HF {acc_hf:.4f}, xlnet.cpp {acc_ours:.4f}")
  return 0 if agree >= args.min_agreement else 1


if __name__ == "__main__":
  sys.exit(main())
