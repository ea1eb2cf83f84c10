#!/usr/bin/env python3
"""Writes the seed inputs of fuzz/corpus/<target>/seed_* (deterministic).

Run from the repository root: python3 fuzz/make_seeds.py. Inputs found by
fuzzing (crash_*, found_*) sit beside the seeds and are never rewritten.
Seeds are small valid (or nearly valid) files of each format, taken from
tests/fixtures, configs/ and data/sample or built here.
"""
import json
import os
import struct
import zipfile
import zlib

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CORPUS = os.path.join(ROOT, "fuzz", "corpus")


def src(path):
    with open(os.path.join(ROOT, path), "rb") as f:
        return f.read()


def put(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, "seed_" + name), "wb") as f:
        f.write(data)


def safetensors(tensors, metadata=None):
    header, blobs, offset = {}, b"", 0
    for name, (dtype, shape, blob) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [offset, offset + len(blob)]}
        blobs += blob
        offset += len(blob)
    if metadata is not None:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + blobs


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def shard_v2(docs, id_bytes=2):
    ids, flags, begins = [], [], []
    for doc in docs:
        begins.append(len(ids))
        ids += doc + [7]  # <eod>
        flags += [0] * (len(doc) + 1)
    n = len(ids)
    body = struct.pack("<%d%s" % (n, "H" if id_bytes == 2 else "i"), *ids)
    body += bytes(flags)
    body += b"\0" * (-(128 + len(body)) % 8)
    body += struct.pack("<%dQ" % len(docs), *begins)
    hashes = []
    for i, b in enumerate(begins):
        e = begins[i + 1] if i + 1 < len(begins) else n
        hashes.append(fnv1a64(struct.pack("<%di" % (e - b), *ids[b:e])))
    body += struct.pack("<%dQ" % len(docs), *hashes)
    header = b"XLNSHARD" + struct.pack("<II", 2, 128)
    header += struct.pack("<QQQQQQQQ", n, len(docs), 0x1234, fnv1a64(body),
                          len(docs), 0, 0, 0)
    header += struct.pack("<IIQ", id_bytes, 0, 0)
    header += b"\0" * (128 - len(header))
    return header + body, n, fnv1a64(body)


def proto_varint(v):
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def proto_field(num, wire, payload):
    key = proto_varint((num << 3) | wire)
    if wire == 0:
        return key + proto_varint(payload)
    if wire == 5:
        return key + struct.pack("<f", payload)
    return key + proto_varint(len(payload)) + payload


def spm_model():
    """A tiny unigram SentencePiece ModelProto with XLNet's special pieces."""
    pieces = [("<unk>", 0.0, 2), ("<s>", 0.0, 3), ("</s>", 0.0, 3),
              ("<cls>", 0.0, 3), ("<sep>", 0.0, 3), ("<pad>", 0.0, 3),
              ("<mask>", 0.0, 3), ("<eod>", 0.0, 3), ("<eop>", 0.0, 3)]
    for i, p in enumerate(["\u2581", "\u2581the", "e", "t", "a", "o", "n",
                           "s", "h", "l", "r", "d", ",", ".", "1", "0",
                           "\u2581w", "\u2581H"]):
        pieces.append((p, -1.0 - i * 0.1, 1))
    out = b""
    for text, score, kind in pieces:
        out += proto_field(1, 2, proto_field(1, 2, text.encode()) +
                           proto_field(2, 5, score) + proto_field(3, 0, kind))
    trainer = (proto_field(3, 0, 1) +  # model_type UNIGRAM
               proto_field(4, 0, len(pieces)) +  # vocab_size
               proto_field(40, 0, 0) + proto_field(41, 0, 1) +
               proto_field(42, 0, 2) + proto_field(43, 0, 5))
    normalizer = proto_field(1, 2, b"identity") + proto_field(3, 0, 1)
    return out + proto_field(2, 2, trainer) + proto_field(3, 2, normalizer)


def main():
    # safetensors
    put("safetensors", "golden_inputs", src(
        "tests/fixtures/golden_tiny/inputs.safetensors"))
    put("safetensors", "small", safetensors({
        "a.weight": ("F32", [2, 3], struct.pack("<6f", *range(6))),
        "b": ("BF16", [], b"\x80\x3f"),
        "c": ("I64", [0], b""),
        "d": ("BOOL", [3], b"\x01\x00\x01"),
    }, {"format": "pt"}))
    put("safetensors", "empty", safetensors({}))
    # Large headers: parsing must stay O(n log n) in the tensor count (the
    # duplicate-key check was once quadratic). The 60-entry seed fits the
    # fuzzing -max_len; the 4096-entry ones are replayed.
    for n in [60, 4096]:
        put("safetensors", "many_tensors_%d" % n, safetensors({
            "t%d" % i: ("U8", [1], bytes([i % 256])) for i in range(n)}))
    # The same with its last name repeating an early one (same length, so
    # the header length still holds).
    many = safetensors({"t%04d" % i: ("U8", [1], b"\0") for i in range(4096)})
    put("safetensors", "many_tensors_duplicate",
        many.replace(b'"t4095"', b'"t0007"'))
    # YAML config
    for name in ["tiny.yaml", "tiny-finetune.yaml", "small.yaml"]:
        put("config_yaml", name, src("configs/" + name))
    put("config_yaml", "overrides",
        "model:\n  d_model: 32\n  n_layer: 2\n  n_head: 2\n  d_head: 16\n"
        "  d_inner: 64\ndata:\n  seq_len: 16\n  reuse_len: 8\n"
        "train:\n  lr: 1.0e-4\n  max_steps: 3\n")
    # config.json
    put("model_config_json", "hf", src("tests/fixtures/hf_config.json"))
    put("model_config_json", "bi_data",
        src("tests/fixtures/golden_tiny/config_bi_data.json"))
    # Shard files and manifests.
    shard, tokens, checksum = shard_v2([[10, 11, 12], [13, 14]])
    put("shard", "v2_small", shard)
    shard4, _, _ = shard_v2([[100, 200, 300, 400]], id_bytes=4)
    put("shard", "v2_int32", shard4)
    put("shard", "v1_fixture", src(
        "tests/fixtures/shards_v1/shard-00000.bin"))
    put("manifest", "v1_fixture", src("tests/fixtures/shards_v1/manifest.json"))
    manifest = {
        "format": "xlnet-data-shards", "format_version": 2,
        "inputs": [{"bytes": 40, "path": "in.txt"}],
        "shard_bytes": 16777216,
        "shards": [{"byte_begin": 0, "byte_end": 40,
                    "checksum": "%016x" % checksum, "docs": 2,
                    "file": "shard-00000.bin", "first_line": 1, "input": 0,
                    "key": "%016x" % 0x1234, "tokens": tokens}],
        "text_rules": {"json_key": "text", "keep_accents": False,
                       "max_line_bytes": 1048576, "uncased": False,
                       "use_eod": True},
        "tokenizer": {"file": "spiece.model", "hash": "8fef00f957822c2b",
                      "vocab_size": 1000},
        "totals": {"docs": 2, "empty_files": 0, "files": 1,
                   "invalid_utf8_lines": 0, "lines": 3, "overlong_lines": 0,
                   "skipped_records": 0, "tokens": tokens},
    }
    put("manifest", "v2", json.dumps(manifest, indent=2))
    # Checkpoint checksums.json; the target's directory holds weights.bin =
    # "xlnet\n".
    put("checkpoint", "ok", json.dumps({
        "format": "checksums", "format_version": 1,
        "files": {"weights.bin": {"bytes": 6,
                                  "crc32": zlib.crc32(b"xlnet\n")}}}))
    put("checkpoint", "trainer_state", json.dumps({
        "format": "trainer_state", "format_version": 1, "step": 2,
        "skipped_steps": 0, "world_size": 1, "loss_scale": 65536.0}))
    # TSV / JSON Lines examples: the first byte is the mode (bit 0 JSON Lines,
    # bit 1 regression, bit 2 labels optional, bit 3 skip bad rows).
    tsv = b"".join(src("data/sample/genre_dev.tsv").splitlines(True)[:6])
    put("examples", "tsv", b"\x00" + tsv)
    put("examples", "tsv_pair", b"\x08sentence1\tsentence2\tlabel\n"
        b"A man.\tA person.\tentailment\nbad row\nB\tC\tneutral\n")
    put("examples", "tsv_regression",
        b"\x02sentence\tlabel\nfine\t0.5\nnot\tx\n")
    put("examples", "jsonl", b"\x01" + b"\n".join(json.dumps(r).encode() for r in [
        {"text": "Good.", "label": "pos"},
        {"text": "Bad.", "label": "neg"},
        {"text_a": "x", "text_b": "y", "label": 1}]) + b"\n")
    put("examples", "jsonl_unlabeled",
        b"\x0d" + b'{"sentence": "caf\xc3\xa9"}\n{"sentence": 3}\n\n')
    # SQuAD: the first byte is the mode (bit 0 answers optional, bit 1 no
    # span check, bit 2 skip bad rows).
    squad = src("tests/fixtures/finetune/squad_v2_small.json")
    put("squad", "v2_small", b"\x00" + squad)
    put("squad", "tiny", b"\x04" + json.dumps({"version": "v2.0", "data": [
        {"title": "t", "paragraphs": [{"context": "Caf\u00e9 au lait.", "qas": [
            {"id": "1", "question": "What?", "answers": [
                {"text": "lait", "answer_start": 8}]},
            {"id": "2", "question": "No?", "answers": [],
             "is_impossible": True},
            {"id": "1", "question": "Dup?", "answers": [
                {"text": "x", "answer_start": 99}]}]}]}]}).encode())
    # Pickle: the data.pkl of a real torch.save file (the target supplies
    # data/0 and data/1 of the same sizes).
    with zipfile.ZipFile(os.path.join(
            ROOT, "tests/fixtures/torch_save/ordered_state_dict.bin")) as z:
        put("pickle", "ordered_state_dict", z.read("archive/data.pkl"))
    put("pickle", "plain_dict",
        b"\x80\x02}q\x00(X\x01\x00\x00\x00aq\x01K\x01X\x01\x00\x00\x00bq\x02"
        b"]q\x03(K\x01G?\xf0\x00\x00\x00\x00\x00\x00\x88N\x86q\x04eu.")
    # SentencePiece model.
    put("tokenizer", "tiny_unigram", spm_model())


if __name__ == "__main__":
    main()
