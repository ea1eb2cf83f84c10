"""The table of xlnet_docs_commands_test: one entry per documented command.

Each entry is keyed by the command's text as docs_commands_test.py extracts
it (`docs_commands_test.py BUILD SRC --list` prints every key): `\\`
continuations joined, runs of spaces made one, a trailing `# comment` and a
`$ ` prompt dropped, $VAR left as written; a ```python block is
"python: " + its first line. A command documented on several pages has one
entry.

run(KEY, ...) runs it, in this file's order, in the test's temporary
directory (configs/, data/, scripts/, tests/ and build/ link to the tree and
the build):
  subst   (OLD, NEW) pairs, each replacing the first OLD (which must be
          there): placeholders (DIR, RUN, step_4000, `...`) become what the
          test made earlier; optional `[--flag value]` parts left are run
          with the brackets dropped, so a pair removes those that cannot
          run here;
  append  tiny settings added at the end (few steps, one thread);
  files   user files the command reads, made by USER_FILES below;
  before  a shell line run first (a step the docs leave to the user);
  expect  text its output must contain (besides the lines the docs show
          after a `$ ` prompt line, always checked);
  exit    the expected exit status (0);
  python  needs the Python with transformers (skipped without it).
check(KEY, REASON) does not run it, for the reason given, and checks what
can be checked without running (see docs_commands_test.py); every entry,
run or not, gets the checks of its --flags and repository paths.
"""
import gzip
import os
import shutil
import struct
import subprocess
import sys


def run(cmd, subst=(), append="", files=(), before="", expect=(), exit=0,
        python=False):
  return dict(cmd=cmd, reason=None, subst=list(subst), append=append,
              files=list(files), before=before, expect=list(expect),
              exit=exit, python=python, line=sys._getframe(1).f_lineno)


def check(cmd, reason):
  return dict(cmd=cmd, reason=reason, line=sys._getframe(1).f_lineno)


# Few steps of the tiny configs, one thread: the docs' runs in seconds.
TINY = ("--set train.max_steps=4 --set train.save_steps=4 "
        "--set train.eval_steps=2 --set train.eval_batches=1 "
        "--set train.log_steps=1 --set train.threads=1")
TINY_FT = ("--set train.max_steps=4 --set train.eval_steps=2 "
           "--set train.log_steps=1 --set train.threads=1")
# xlnet-data prepare's inputs as tools.md names them, for the runs below.
PREPARE = "--input 'corpus/*.txt' --tokenizer spiece.model"
PRETRAIN = "--config configs/tiny.yaml --data prepared/ --out runs/x"
GPU = ("needs a GPU (train.device=cuda; xlnet-inspect accepts the key and "
       "the value on a CPU build, so both are checked)")


def steps(n):
  """TINY with train.max_steps=n (a resume that continues the run)."""
  return TINY.replace("max_steps=4", f"max_steps={n}")


ENTRIES = [
    # ---- README: the two commands.
    check("scripts/demo.sh",
          "installs packages and builds as root, then runs the walkthrough "
          "whose steps are the README lines run below"),
    check("scripts/test.sh",
          "what CI runs: installs packages, builds and runs every test, "
          "this one included"),

    # ---- README walkthrough, one chain (docs/pretraining.md repeats the
    # causal LM line).
    run("build/bin/xlnet-data tokenizer --input data/sample/brown_sample.txt "
        "--vocab_size 1000 --out runs/mine/spiece.model"),
    run("build/bin/xlnet-data prepare --input data/sample/brown_sample.txt "
        "--tokenizer runs/mine/spiece.model --config configs/tiny.yaml "
        "--out runs/mine/data --workers 2"),
    run("build/bin/xlnet-data inspect --data runs/mine/data "
        "--config configs/tiny.yaml"),
    run("build/bin/xlnet-pretrain --config configs/tiny.yaml "
        "--data runs/mine/data --out runs/mine/pretrain --resume latest",
        append=TINY),  # RUN/tb by default: check_tensorboard.py reads it
    check("build/bin/xlnet-pretrain --config configs/xlnet-base.yaml "
          "--data DATA --out RUN --set train.device=cuda --resume latest "
          "--nproc_per_node 8", "8 GPUs; " + GPU),
    check("torchrun --nproc_per_node 8 --redirects 1 --tee 1 --no_python "
          "build/bin/xlnet-pretrain --config configs/xlnet-base.yaml "
          "--data DATA --out RUN --set train.device=cuda --resume latest",
          "8 GPUs; " + GPU),
    run("build/bin/xlnet-finetune --config configs/tiny-finetune.yaml "
        "--task classification --init runs/mine/pretrain/checkpoints/step_4000 "
        "--tokenizer runs/mine/spiece.model "
        "--train data/sample/genre_train.tsv "
        "--dev data/sample/genre_dev.tsv --test data/sample/genre_test.tsv "
        "--out runs/mine/finetune --resume latest",
        subst=[("step_4000", "step_4")], append=TINY_FT,
        expect=["run finished at step 4"]),
    run("build/bin/xlnet-export --checkpoint runs/mine/finetune/best "
        "--out runs/mine/export/classifier"),
    run("build/bin/xlnet-export --checkpoint "
        "runs/mine/pretrain/checkpoints/step_4000 "
        "--out runs/mine/export/encoder --encoder_only",
        subst=[("step_4000", "step_4")]),
    run("python: from transformers import AutoTokenizer, "
        "XLNetForSequenceClassification, XLNetModel", python=True),
    run("build/bin/xlnet-pretrain --config configs/tiny-clm.yaml "
        "--data runs/mine/data --out runs/mine/clm --resume latest",
        append=TINY),
    run("build/bin/xlnet-lm eval --model runs/mine/clm/checkpoints/step_4000 "
        "--text held_out.txt --mode all --seq_len 64 --mem_len 64",
        subst=[("step_4000", "step_4")], files=["held_out.txt"]),
    run("build/bin/xlnet-lm generate --model "
        "runs/mine/clm/checkpoints/step_4000 --prompt 'The jury said' "
        "--max_new_tokens 40 --temperature 0.8 --top_k 40",
        subst=[("step_4000", "step_4")]),

    # ---- docs/hf-migration.md: the checks by hand, on the README's run.
    check("scripts/setup_python.sh",
          "installs Python packages from the network (scripts/test.sh runs "
          "it before ctest)"),
    check("ctest --test-dir build -R xlnet_hf_check_test --output-on-failure",
          "another CTest test (about 70 s); its name is checked to be "
          "registered"),
    run("build/pyenv/bin/python scripts/check_hf_export.py DIR...",
        subst=[("DIR...",
                "runs/mine/export/classifier runs/mine/export/encoder")],
        python=True),
    run("build/pyenv/bin/python scripts/check_tensorboard.py RUN",
        subst=[("RUN", "runs/mine/pretrain")], python=True),

    # ---- docs/configuration.md: a misspelled key and the error shown.
    run("build/bin/xlnet-inspect configs/tiny.yaml --set model.d_modle=128",
        exit=2),

    # ---- docs/finetuning.md: RACE, on the README's pretraining run.
    run("build/bin/xlnet-finetune --task multiple_choice "
        "--init runs/demo/pretrain/checkpoints/step_4000 "
        "--config configs/tiny-finetune.yaml --set finetune.max_qa_length=32 "
        "--train data/race_sample/train --dev data/race_sample/dev "
        "--out runs/demo/race",
        subst=[("runs/demo/pretrain/checkpoints/step_4000",
                "runs/mine/pretrain/checkpoints/step_4")],
        append="--set train.max_steps=2 --set train.eval_steps=2 "
        "--set train.threads=1 --set finetune.max_seq_length=96"),

    # ---- docs/lm.md: every optional flag that runs on a CPU.
    run("build/bin/xlnet-lm eval --model DIR --text test.txt --mode all "
        "--seq_len 128 --mem_len 128 [--batch_size 8] [--max_tokens 20000] "
        "[--dtype bf16] [--device cuda] [--json out.json]",
        subst=[("DIR", "runs/mine/clm/checkpoints/step_4"),
               ("test.txt", "held_out.txt"),
               ("20000", "100"),  # bf16 is slow on a CPU
               ("[--device cuda]", "")],  # a GPU; the flag is checked
        files=["held_out.txt"]),
    run("build/bin/xlnet-lm generate --model DIR --prompt 'The jury said' "
        "--max_new_tokens 40 [--greedy | --temperature 0.8 --top_k 40 "
        "--top_p 0.9] [--seed 1] [--mem_len 512] [--no_cache] [--stop_at_eod]",
        subst=[("DIR", "runs/mine/clm/checkpoints/step_4"),
               ("[--greedy | ", "[")]),  # --greedy: see the next line

    # ---- docs/tools.md, one chain in its own names (data/ -> prepared/,
    # as data/ is the repository's folder here).
    run("build/bin/xlnet-data tokenizer --input corpus.txt --vocab_size 32000 "
        "--out spiece.model",
        subst=[("32000", "1000")],  # the sample is too small for 32000
        files=["corpus.txt"]),
    run("build/bin/xlnet-data prepare --input 'corpus/*.txt' "
        "--tokenizer spiece.model --out data/ --workers 8",
        subst=[("data/", "prepared/"), ("--workers 8", "--workers 2")],
        files=["corpus/"]),
    run("build/bin/xlnet-data prepare --input 'web/*.jsonl.zst' "
        "--json_key text ...",
        subst=[("...", "--tokenizer spiece.model --out prepared_web/")],
        files=["web/"]),
    run("build/bin/xlnet-data prepare ... --num_tasks 4 --task 2",
        subst=[("...", PREPARE + " --out prepared_split/")],
        before="for i in 0 1 3; do build/bin/xlnet-data prepare " + PREPARE +
        " --out prepared_split/ --num_tasks 4 --task $i || exit 1; done"),
    run("build/bin/xlnet-data combine --out data/",
        subst=[("data/", "prepared_split/")]),
    run("build/bin/xlnet-data inspect --data data/ --config configs/tiny.yaml",
        subst=[("data/", "prepared/")]),
    run("build/bin/xlnet-data dump --data data/ --config configs/tiny.yaml "
        "--batches 4 --out batches.safetensors",
        subst=[("data/", "prepared/")]),
    run("build/bin/xlnet-data inspect --config blend.yaml --step 300 --row 5",
        files=["blend.yaml"], expect=["source"]),
    run("build/bin/xlnet-pretrain --config configs/tiny.yaml --data data/ "
        "--out runs/x [--set train.lr=3e-4]",
        subst=[("data/", "prepared/")], append=TINY),
    run("build/bin/xlnet-pretrain --config blend.yaml --out runs/b",
        files=["blend.yaml"], append=TINY),
    run("build/bin/xlnet-pretrain ... --resume latest",
        subst=[("...", PRETRAIN)], append=steps(6),
        expect=["run finished at step 6"]),
    run("build/bin/xlnet-pretrain ... --resume latest --set train.lr=1e-4",
        subst=[("...", PRETRAIN)], append=steps(8),
        expect=["resume: train.lr", "-> 0.0001"]),
    run("build/bin/xlnet-pretrain ... --resume latest --set train.seed=7 "
        "--allow_changed_settings",
        subst=[("...", PRETRAIN)], append=steps(10),
        expect=["train.seed"]),
    run("build/bin/xlnet-pretrain ... --overwrite",
        subst=[("...", PRETRAIN)], append=TINY,
        expect=["run finished at step 4"]),
    run("build/bin/xlnet-pretrain ... --nproc_per_node 2",
        subst=[("...", PRETRAIN.replace("runs/x", "runs/x2"))], append=TINY,
        expect=["run finished at step 4"]),
    check("torchrun --nproc_per_node 8 --redirects 1 --tee 1 --no_python "
          "build/bin/xlnet-pretrain ...",
          "8 processes under torchrun (xlnet_launch_e2e_test runs torchrun "
          "with 2)"),
    run("build/bin/xlnet-plot runs/x --out loss.png"),
    run("build/bin/xlnet-finetune --config configs/tiny-finetune.yaml "
        "--task classification --init runs/x/checkpoints/step_4000 "
        "--train train.tsv --dev dev.tsv --test test.tsv --out runs/ft",
        subst=[("step_4000", "step_4")], append=TINY_FT,
        files=["train.tsv", "dev.tsv", "test.tsv"]),
    run("build/bin/xlnet-finetune ... --task squad --train train-v2.0.json "
        "--dev dev-v2.0.json ...",
        subst=[("...", "--config configs/tiny-finetune.yaml "
                "--init runs/x/checkpoints/step_4"),
               ("...", "--out runs/ft_squad --set finetune.doc_stride=24 "
                "--set finetune.max_query_length=16")],
        append=TINY_FT.replace("max_steps=4", "max_steps=2"),
        files=["train-v2.0.json", "dev-v2.0.json"]),
    run("build/bin/xlnet-squad-eval dev-v2.0.json "
        "runs/ft/predictions_dev/predictions.json "
        "--null_odds runs/ft/predictions_dev/null_odds.json",
        subst=[("runs/ft/", "runs/ft_squad/"), ("runs/ft/", "runs/ft_squad/")],
        expect=["best_f1"]),
    run("build/bin/xlnet-baseline --train train.tsv --dev dev.tsv "
        "--test test.tsv --out runs/bow", append="--epochs 5"),
    run("build/bin/xlnet-export --checkpoint runs/ft/best "
        "--out export/classifier [--dtype bf16]"),
    run("build/bin/xlnet-export --checkpoint runs/x/checkpoints/step_4000 "
        "--out export/encoder --encoder_only",
        subst=[("step_4000", "step_4")]),
    run("build/bin/xlnet-run --model DIR --inputs in.safetensors "
        "--outputs out.safetensors [--dtype bf16]",
        subst=[("DIR", "runs/x/checkpoints/step_4")],
        files=["in.safetensors"], append="--threads 1"),
    run("build/bin/xlnet-lm eval --model DIR --text test.txt --mode all "
        "--seq_len 128 --mem_len 128 [--json out.json]",
        subst=[("DIR", "runs/mine/clm/checkpoints/step_4"),
               ("test.txt", "held_out.txt")],
        files=["held_out.txt"]),
    run("build/bin/xlnet-lm generate --model DIR --prompt 'The jury said' "
        "--max_new_tokens 40 --top_p 0.9 --seed 1",
        subst=[("DIR", "runs/mine/clm/checkpoints/step_4")]),
    run("build/bin/xlnet-inspect model.safetensors",
        subst=[("model.safetensors",
                "runs/x/checkpoints/step_4/model.safetensors")]),
    run("build/bin/xlnet-inspect runs/x/checkpoints/step_100",
        subst=[("step_100", "step_4")]),
    run("build/bin/xlnet-inspect configs/tiny.yaml --set train.lr=3e-4",
        expect=["lr: 0.0003"]),
    run("build/bin/xlnet-inspect --runtime"),
    # Benchmarks at toy sizes: they run, the figures mean nothing here.
    run("build/bin/xlnet-bench --config configs/small.yaml --steps 10 "
        "--warmup 2 --json small.json",
        subst=[("--steps 10 --warmup 2", "--steps 1 --warmup 0")],
        append="--matmul_size 64 --matmul_seconds 1 --data_batches 1 "
        "--set model.vocab_size=1000 --set model.n_layer=1 "
        "--set model.d_model=64 --set model.d_head=16 --set model.d_inner=128 "
        "--set model.mem_len=16 --set data.seq_len=32 --set data.reuse_len=16 "
        "--set data.perm_size=16 --set data.num_predict=5 "
        "--set train.batch_size=2"),
    run("build/bin/xlnet-bench-matmul", append="--size 64 --seconds 1"),
    run("build/bin/xlnet-bench-two-stream",
        append="--d_model 64 --n_head 4 --d_inner 128 --seq_len 32 "
        "--num_predict 8 --batch 1 --iters 1 --warmup 0"),
    run("build/bin/xlnet-bench-attention",
        append="--d_model 64 --n_head 4 --d_inner 128 --seq_len 32 "
        "--mem_len 16 --num_predict 8 --iters 1 --warmup 0"),
    # Its default --input is a path on the developers' machine: given here.
    run("build/bin/xlnet-bench-data",
        append="--vocab_size 1000 --batches 2"),
    run("build/bin/xlnet-bench-lm",
        append="--d_model 64 --n_layer 1 --tokens 64 --seq_lens 16 "
        "--contexts 16 --new_tokens 2 --repeats 1"),

    # ---- docs/distributed.md: GPUs, nodes and SLURM ($ARGS: its
    # xlnet-base line with train.device=cuda).
    check("build/bin/xlnet-pretrain $ARGS --nproc_per_node 8",
          "8 GPUs; " + GPU),
    check("torchrun --nproc_per_node 8 --redirects 1 --tee 1 --no_python "
          "build/bin/xlnet-pretrain $ARGS", "8 GPUs; " + GPU),
    check("torchrun --nnodes 2 --node_rank 0 --nproc_per_node 8 "
          "--master_addr NODE0 --master_port 29500 --redirects 1 --tee 1 "
          "--no_python build/bin/xlnet-pretrain $ARGS",
          "two machines with 8 GPUs each"),
    check("torchrun --nnodes 2 --nproc_per_node 8 --rdzv_backend c10d "
          "--rdzv_endpoint NODE0:29400 --rdzv_id JOB --redirects 1 --tee 1 "
          "--no_python build/bin/xlnet-pretrain $ARGS",
          "two machines with 8 GPUs each"),
    check("GLOO_SOCKET_IFNAME=eth0 torchrun --nnodes 2 --nproc_per_node 8 "
          "--rdzv_backend c10d --rdzv_endpoint NODE0:29400 --rdzv_id JOB "
          "--redirects 1 --tee 1 --no_python build/bin/xlnet-pretrain $ARGS",
          "two machines (xlnet_two_host_test runs this on two network "
          "namespaces)"),
    check("torchrun --nproc_per_node 8 --max_restarts 3 --redirects 1 --tee 1 "
          "--no_python build/bin/xlnet-pretrain $ARGS", "8 GPUs; " + GPU),
    check("XLNET_DATA=/shared/shards sbatch scripts/slurm/pretrain.sbatch",
          "SLURM's sbatch (xlnet_slurm_test runs the script under a "
          "one-node SLURM)"),
    check("torchrun --nnodes 2 --nproc_per_node 1 --rdzv_backend c10d "
          "--rdzv_endpoint 10.213.N.1:46900 --rdzv_id ID --redirects 1 "
          "--tee 1 --no_python build/bin/xlnet-pretrain $ARGS",
          "two hosts: what xlnet_two_host_test runs"),
    check("GLOO_SOCKET_IFNAME=xlvI-PID torchrun --nnodes 2 --nproc_per_node 1 "
          "--rdzv_backend c10d --rdzv_endpoint xlnet-h0-PID:46900 "
          "--rdzv_id ID --redirects 1 --tee 1 --no_python "
          "build/bin/xlnet-pretrain $ARGS",
          "two hosts: what xlnet_two_host_test runs"),
    check("ctest --test-dir build -R xlnet_two_host_test --output-on-failure",
          "another CTest test (root, network namespaces, about a minute); "
          "its name is checked to be registered"),
    check("tests/train/two_host_test.sh build .",
          "the script of xlnet_two_host_test (root, about a minute)"),
    check("XLNET_REQUEUE=0 XLNET_DATA=/shared/shards sbatch --parsable "
          "scripts/slurm/pretrain.sbatch", "SLURM's sbatch"),
    check("XLNET_REQUEUE=0 XLNET_DATA=/shared/shards sbatch "
          "--dependency=afterany:$id scripts/slurm/pretrain.sbatch",
          "SLURM's sbatch"),
    check("XLNET_DEVICE=cpu XLNET_CONFIG=configs/tiny.yaml XLNET_DATA=DATA "
          "XLNET_RUN=RUN XLNET_BIN=build/bin "
          "XLNET_SET=\"model.dropout=0 train.max_steps=465\" sbatch --nodes=1 "
          "--ntasks-per-node=2 --gpus-per-node=0 --cpus-per-task=1 --time=2 "
          "--signal=B:TERM@80 scripts/slurm/pretrain.sbatch",
          "SLURM's sbatch: what xlnet_slurm_test submits"),
    check("ctest --test-dir build -R xlnet_slurm_test --output-on-failure",
          "another CTest test (root, SLURM daemons, about 2 minutes); its "
          "name is checked to be registered"),
    check("tests/slurm/slurm_test.sh build .",
          "the script of xlnet_slurm_test (root, about 2 minutes)"),
]


# User files: name -> maker(path, source_dir). Made from the repository's
# samples the first time an entry lists them.
def _sample(src):
  return os.path.join(src, "data", "sample", "brown_sample.txt")


def _documents(src):
  """The sample's documents (blank-line separated), as text blocks."""
  text = open(_sample(src), encoding="utf-8").read()
  return [d.strip("\n") + "\n" for d in text.split("\n\n") if d.strip()]


def _corpus_dir(path, src):
  # Four files, so that prepare --num_tasks 4 gives each task one.
  docs = _documents(src)
  os.makedirs(path)
  for i in range(4):
    with open(os.path.join(path, f"part{i}.txt"), "w") as f:
      f.write("\n".join(docs[i::4]))


def _web_dir(path, src):
  # JSON Lines, one document a record, zstd-compressed by the zstd tool.
  import json
  os.makedirs(path)
  plain = os.path.join(path, "docs.jsonl")
  with open(plain, "w") as f:
    for doc in _documents(src)[:10]:
      f.write(json.dumps({"text": doc.replace("\n", " ")}) + "\n")
  subprocess.run(["zstd", "-q", "--rm", plain, "-o", plain + ".zst"],
                 check=True)


def _held_out(path, src):
  # The first lines of the sample's last document, about 250 tokens: the
  # sliding mode runs one window per token.
  lines = _documents(src)[-1].split("\n")
  text = ""
  while lines and len(text) < 600:
    text += lines.pop(0) + "\n"
  with open(path, "w") as f:
    f.write(text)


def _blend(path, src):
  # configs/tiny.yaml with two sources, as docs/pretraining.md's example.
  text = open(os.path.join(src, "configs", "tiny.yaml")).read()
  sources = ("data:\n  sources:\n"
             "    - {path: prepared, weight: 0.75}\n"
             "    - {path: prepared_web, weight: 0.25, name: web}\n"
             "  source_block_steps: 100\n")
  with open(path, "w") as f:
    f.write(text.replace("data:\n", sources, 1))


def _inputs(path, src):
  # input_ids [1, 8] int64 in safetensors (header length, JSON, bytes).
  import json
  ids = struct.pack("<8q", *range(10, 18))
  header = json.dumps({"input_ids": {"dtype": "I64", "shape": [1, 8],
                                     "data_offsets": [0, len(ids)]}}).encode()
  with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(header)) + header + ids)


def _copy(*parts):
  return lambda path, src: shutil.copy(os.path.join(src, *parts), path)


USER_FILES = {
    "corpus.txt": _copy("data", "sample", "brown_sample.txt"),
    "corpus/": _corpus_dir,
    "web/": _web_dir,
    "held_out.txt": _held_out,
    "blend.yaml": _blend,
    "in.safetensors": _inputs,
    "train.tsv": _copy("data", "sample", "genre_train.tsv"),
    "dev.tsv": _copy("data", "sample", "genre_dev.tsv"),
    "test.tsv": _copy("data", "sample", "genre_test.tsv"),
    "train-v2.0.json": _copy("tests", "fixtures", "finetune",
                             "squad_v2_small.json"),
    "dev-v2.0.json": _copy("tests", "fixtures", "finetune",
                           "squad_v2_small.json"),
}
