#!/usr/bin/env python3
"""Loads xlnet-export directories in HuggingFace transformers and checks them.

  check_hf_export.py MODEL_DIR... [--text FILE --prepared DIR]...
                     [--tsv DEV.tsv --predictions RUN/predictions_dev.tsv
                      [--max_prob_diff X]] [--device cpu|cuda] [--max_length N]

For every MODEL_DIR:
1. The AutoModel* class for config.json's "architectures" (AutoModel for
   XLNetModel, AutoModelForCausalLM for XLNetLMHeadModel,
   AutoModelForSequenceClassification, AutoModelForMultipleChoice; for
   XLNetForQuestionAnswering the class itself, as transformers'
   AutoModelForQuestionAnswering maps XLNet to XLNetForQuestionAnsweringSimple,
   a different head) loads the directory with from_pretrained: that class, no
   missing, unexpected or mismatched weights.
2. The tokenizer loads with AutoTokenizer (tokenizer_config.json,
   special_tokens_map.json, spiece.model): an XLNet tokenizer whose special
   tokens are ours and which lowercases exactly when tokenizer_config.json's
   do_lower_case says (the ids of a mixed-case text equal spiece.model's ids
   of the text, lowercased for an uncased model).
3. With --text/--prepared (repeatable): the ids of FILE's text (its lines,
   one document; no special tokens) from AutoTokenizer (the fast tokenizer,
   from the export's tokenizer.json when it has one) and from
   AutoTokenizer(use_fast=False) equal the ids that `xlnet-data prepare
   --input FILE` wrote to DIR/shard-00000.bin with the directory's
   spiece.model (xlnet.cpp's tokenizer with its text rules, line by line;
   the shard's final <eod> aside).
4. With --tsv/--predictions, for each sequence classifier: HF's predictions on
   the TSV's `sentence` column agree with xlnet-finetune's predictions file,
   row by row (at least --min_agreement), and with --max_prob_diff every
   class probability is within that of the file's prob_<label> columns
   (printed to 6 significant digits). The inputs are the directory's
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
import struct
import sys

import sentencepiece
import torch
import transformers

# XLNet's special ids (spiece.model as xlnet-data writes it, and official).
SEP_ID, CLS_ID, PAD_ID, EOD_ID = 4, 3, 5, 7

# config.json's architecture -> the transformers Auto class that loads it.
AUTO_CLASS = {
    "XLNetModel": "AutoModel",
    "XLNetLMHeadModel": "AutoModelForCausalLM",
    "XLNetForSequenceClassification": "AutoModelForSequenceClassification",
    "XLNetForMultipleChoice": "AutoModelForMultipleChoice",
    "XLNetForQuestionAnswering": "XLNetForQuestionAnswering",
}


def shard_ids(prepared_dir):
  """The token ids of DIR/shard-00000.bin (shard format version 2:
  data_pipeline/shard_format.cc; version at byte 8, num_tokens at 16,
  bytes per id at 80, the ids from byte 128)."""
  with open(os.path.join(prepared_dir, "shard-00000.bin"), "rb") as f:
    data = f.read()
  if data[:8] != b"XLNSHARD" or struct.unpack_from("<I", data, 8)[0] != 2:
    raise ValueError(f"{prepared_dir}/shard-00000.bin: not a version-2 shard")
  n = struct.unpack_from("<Q", data, 16)[0]
  width = struct.unpack_from("<I", data, 80)[0]
  return list(struct.unpack_from(f"<{n}{'H' if width == 2 else 'i'}",
                                 data, 128))


def ids_equal(text_file, prepared_dir, tokenizers):
  """Whether each tokenizer's ids of text_file's lines (one sentence each,
  tokenized apart as xlnet-data prepare does) equal the ids that prepare
  wrote for them to prepared_dir (check 3)."""
  with open(text_file) as f:
    lines = [line.strip() for line in f if line.strip()]
  ours = shard_ids(prepared_dir)
  if ours and ours[-1] == EOD_ID:
    ours = ours[:-1]
  for tok in tokenizers:
    hf_ids = [i for line in lines
              for i in tok(line, add_special_tokens=False)["input_ids"]]
    print(f"{text_file}: {type(tok).__name__} {len(hf_ids)} ids, "
          f"xlnet-data prepare {len(ours)} ids: "
          f"{'equal' if hf_ids == ours else 'DIFFER'}")
    if hf_ids != ours:
      at = next((k for k, (a, b) in enumerate(zip(hf_ids, ours)) if a != b),
                min(len(hf_ids), len(ours)))
      window = slice(max(0, at - 8), at + 8)
      print(f"  first difference at id {at}:\n"
            f"  transformers: {tok.convert_ids_to_tokens(hf_ids[window])}\n"
            f"  xlnet.cpp:    {tok.convert_ids_to_tokens(ours[window])}")
      return False
  return True


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
  ap.add_argument("model_dirs", nargs="+", metavar="MODEL_DIR")
  ap.add_argument("--text", action="append", default=[],
                  help="a text file, one document (check 3; repeatable)")
  ap.add_argument("--prepared", action="append", default=[],
                  help="xlnet-data prepare's output for each --text")
  ap.add_argument("--tsv")
  ap.add_argument("--predictions")
  ap.add_argument("--device", default="cpu")
  ap.add_argument("--max_length", type=int, default=128,
                  help="the run's finetune.max_seq_length")
  ap.add_argument("--min_agreement", type=float, default=0.99)
  ap.add_argument("--max_prob_diff", type=float,
                  help="largest allowed |HF - xlnet-finetune| probability")
  args = ap.parse_args()
  if len(args.text) != len(args.prepared):
    ap.error("give one --prepared for each --text")
  failed = [d for d in args.model_dirs if check(d, args) != 0]
  if failed:
    print(f"FAILED: {failed}")
  return 1 if failed else 0


def check(model_dir, args):
  with open(os.path.join(model_dir, "config.json")) as f:
    config = json.load(f)
  arch = config["architectures"][0]
  if arch not in AUTO_CLASS:
    print(f"{model_dir}/config.json: unknown architecture {arch}")
    return 1
  model, info = getattr(transformers, AUTO_CLASS[arch]).from_pretrained(
      model_dir, output_loading_info=True)
  problems = {k: v for k, v in info.items() if v}
  print(f"{model_dir}: {AUTO_CLASS[arch]} -> {type(model).__name__}, "
        f"{sum(p.numel() for p in model.parameters()):,} parameters, "
        f"transformers {transformers.__version__}, loading info "
        f"{problems or 'clean'}")
  if problems or type(model).__name__ != arch:
    return 1

  sp = sentencepiece.SentencePieceProcessor(
      model_file=os.path.join(model_dir, "spiece.model"))
  # The directory's tokenizer as a user loads it (spiece.model converted by
  # transformers; in transformers 5 XLNetTokenizer(vocab_file=...) ignores
  # the file and must not be used).
  tok = transformers.AutoTokenizer.from_pretrained(model_dir)
  with open(os.path.join(model_dir, "tokenizer_config.json")) as f:
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
  if args.text:
    # SentencePiece-backed (transformers 4; 5 has no separate slow one).
    slow = transformers.AutoTokenizer.from_pretrained(model_dir,
                                                      use_fast=False)
    for text_file, prepared in zip(args.text, args.prepared):
      if not ids_equal(text_file, prepared, (tok, slow)):
        return 1
  if not args.tsv or arch != "XLNetForSequenceClassification":
    return 0
  with open(args.tsv, newline="") as f:
    rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
  with open(args.predictions, newline="") as f:
    our_rows = list(csv.DictReader(f, delimiter="\t",
                                   quoting=csv.QUOTE_NONE))
  ours = [r["prediction"] for r in our_rows]
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
    out, probs = [], []
    with torch.no_grad():
      for i in range(0, len(rows), 64):
        batch = make_batch([r["sentence"] for r in rows[i:i + 64]])
        batch = {k: v.to(args.device) for k, v in batch.items()}
        logits = model(**batch).logits.float()
        out += [id2label[j] for j in logits.argmax(-1).tolist()]
        probs += logits.softmax(-1).tolist()
    return out, probs

  via_tokenizer, _ = predict(lambda texts: tok(
      texts, padding=True, truncation=True, max_length=max_len,
      return_tensors="pt"))
  hf, hf_probs = predict(assembled)
  print("HF tokenizer's own batches agree with xlnet.cpp on "
        f"{sum(a == b for a, b in zip(via_tokenizer, ours)) / len(rows):.4f}")
  agree = sum(a == b for a, b in zip(hf, ours)) / len(rows)
  gold = [r.get("label") for r in rows]
  acc_hf = sum(a == g for a, g in zip(hf, gold)) / len(rows)
  acc_ours = sum(a == g for a, g in zip(ours, gold)) / len(rows)
  print(f"{args.tsv}: {len(rows)} rows, HF and xlnet.cpp predictions agree on "
        f"{agree:.4f}; accuracy HF {acc_hf:.4f}, xlnet.cpp {acc_ours:.4f}")
  if agree < args.min_agreement:
    return 1
  if args.max_prob_diff is not None:
    labels = [id2label[j] for j in range(len(id2label))]
    diff = max(abs(p[j] - float(r[f"prob_{label}"]))
               for p, r in zip(hf_probs, our_rows)
               for j, label in enumerate(labels))
    print(f"largest |HF - xlnet.cpp| class probability {diff:.2e} "
          f"(allowed {args.max_prob_diff:.0e})")
    if diff > args.max_prob_diff:
      return 1
  return 0


if __name__ == "__main__":
  sys.exit(main())
