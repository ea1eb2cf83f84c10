#!/usr/bin/env python3
"""CTest xlnet_docs_commands_test: each command of the docs, run or checked.

  docs_commands_test.py BUILD_DIR SOURCE_DIR [--list] [--check_only] [--keep]

Extracts every command from the fenced code blocks of README.md and
docs/*.md (the rules are in extract_commands below) and matches each with
its entry in tests/docs/commands.py, keyed by the command's text. A "run"
entry is run, with the entry's substitutions and tiny overrides, in a
temporary directory whose configs/, data/, scripts/ and tests/ are links to
SOURCE_DIR and whose build/ is a link to BUILD_DIR, so that the docs' paths
(build/bin/..., runs/mine/...) resolve as written; its exit status and the
output the docs show must match. A "check" entry is not run (the entry says
why) but checked as far as that goes without running it: the program exists
(a tool built in BUILD_DIR/bin; a script present, executable and `bash -n` or
Python-compile clean), every --flag is listed by the tool's --help (for
torchrun and sbatch, theirs before the tool or script), every configs/,
data/, scripts/ and tests/ path exists, every --set key=value (and
XLNET_SET of an sbatch line) is accepted by `xlnet-inspect CONFIG --set ...`,
and a CTest name given with -R is registered in BUILD_DIR.

Fails, naming file and line, on a documented command without an entry, an
entry that matches no documented command (stale), a run that fails or lacks
the output the docs show, and a check that does not hold; and when a run
changed the source tree (git status). The Python block of the README runs
with XLNET_CHECK_PYTHON (default BUILD_DIR/pyenv/bin/python, the venv of
scripts/setup_python.sh); without transformers there it is skipped with a
message, or fails when CI is set.

--list prints the extracted commands (file:line, key) and exits;
--check_only skips the runs; --keep keeps the temporary directory. Standard
library only.
"""
import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import commands  # noqa: E402  (the table, beside this file)

NAME = "xlnet_docs_commands_test"
# First words that make a line a command: a path prefix or a program name.
PROGRAM_PREFIXES = ("build/", "scripts/", "tests/")
PROGRAMS = ("torchrun", "sbatch", "ctest", "cmake")
# Fence languages whose lines are shell; python blocks run whole; any other
# language (yaml, json, text...) holds no commands.
SHELL_LANGS = ("", "sh", "bash", "shell", "console")
# Repository folders whose paths in a command must exist.
REPO_DIRS = ("configs/", "data/", "scripts/", "tests/")
RUN_TIMEOUT_S = 120
# The venv of scripts/setup_python.sh as the docs name it; runs use
# XLNET_CHECK_PYTHON's (by default the same) instead.
VENV_PYTHON = "build/pyenv/bin/python"


class Command:
  """One documented command: where it is, its key and its expanded text."""

  def __init__(self, path, line, key, text, shown=(), python=False):
    self.path = path  # relative to the source dir
    self.line = line  # first line of the command (1-based)
    self.key = key  # the text as written, one line, no trailing comment
    self.text = text  # the key with the page's VAR="..." lines expanded
    self.shown = list(shown)  # output lines the docs show after a `$ ` line
    self.python = python  # a whole ```python block

  def where(self):
    return f"{self.path}:{self.line}"


def fenced_blocks(path):
  """Yields (language, [(line_number, text)]) per fenced block, dedented."""
  fence = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)\s*$")
  lines = open(path, encoding="utf-8").read().split("\n")
  i = 0
  while i < len(lines):
    m = fence.match(lines[i])
    if not m:
      i += 1
      continue
    indent, marker, lang = len(m.group(1)), m.group(2), m.group(3).lower()
    body = []
    i += 1
    while i < len(lines) and not lines[i].strip().startswith(marker):
      text = lines[i]
      if text[:indent].strip() == "":
        text = text[indent:]
      body.append((i + 1, text))
      i += 1
    i += 1
    yield lang, body


def strip_comment(line):
  """The line without a trailing `# comment` (a # after a space, unquoted)."""
  quote = None
  for i, c in enumerate(line):
    if quote:
      if c == quote:
        quote = None
    elif c in "'\"":
      quote = c
    elif c == "#" and (i == 0 or line[i - 1].isspace()):
      return line[:i].rstrip()
  return line.rstrip()


ASSIGNMENT = r"[A-Za-z_]\w*=(?:\"[^\"]*\"|'[^']*'|\S*)"


def program_of(text):
  """The command's first word after leading VAR=value assignments."""
  rest = re.sub(rf"^(?:{ASSIGNMENT}\s+)*", "", text)
  return rest.split(" ", 1)[0] if rest else ""


def is_command(text):
  word = program_of(text)
  if word.endswith("/"):
    return False  # a folder (a line of a folder tree), not a program
  return word in PROGRAMS or word.startswith(PROGRAM_PREFIXES)


def expand(text, variables):
  def value(m):
    name = m.group(1) or m.group(2)
    return variables.get(name, m.group(0))

  return re.sub(r"\$\{(\w+)\}|\$(\w+)", value, text)


def shell_commands(path, body, variables):
  """The commands of one shell block (variables: the page's VAR= lines)."""
  # Continuation lines joined; each logical line keeps its first line number.
  logical, pending, start = [], "", None
  for number, text in body:
    if start is None:
      start = number
    if text.rstrip().endswith("\\"):
      pending += text.rstrip()[:-1] + " "
      continue
    logical.append((start, pending + text))
    pending, start = "", None
  if pending:
    logical.append((start, pending))

  prompt = any(t.strip().startswith("$ ") for _, t in logical)
  found = []
  for number, raw in logical:
    line = raw.strip()
    if prompt:
      if line.startswith("$ "):
        line = line[2:]
      else:
        if found and line:
          found[-1].shown.append(line)
        continue
    if line.startswith("#"):
      # "# or: COMMAND   (note)": an alternative command in a comment.
      m = re.match(r"#\s*or:\s*(.*)", line)
      if not m:
        continue
      line = re.split(r"\s{2,}", m.group(1))[0]
    line = " ".join(strip_comment(line).split())
    if not line:
      continue
    # NAME=$(COMMAND): the command inside.
    m = re.fullmatch(r"[A-Za-z_]\w*=\$\((.*)\)", line)
    if m:
      line = m.group(1)
    elif re.fullmatch(ASSIGNMENT, line):
      name, value = line.split("=", 1)
      variables[name] = " ".join(shlex.split(value))
      continue
    if is_command(line):
      found.append(Command(path, number, line, expand(line, variables)))
  return found


def extract_commands(src):
  """Every command of README.md and docs/*.md, in page order.

  A command is a line of a shell (or unlabelled) fenced block, its `\\`
  continuation lines joined, whose first word (after VAR=value assignments)
  is build/..., scripts/..., tests/..., torchrun, sbatch, ctest or cmake; in
  a block with `$ ` prompt lines only those are commands and the lines after
  each are its shown output; `# or: COMMAND` comments and `NAME=$(COMMAND)`
  count as COMMAND; a trailing comment is not part of it; a `VAR="..."` line
  is expanded into the page's later commands that use $VAR. A ```python
  block is one command, keyed "python: " + its first line. Other languages
  (yaml, ...) and lines of other programs (folder trees, mkdir) are not
  commands.
  """
  pages = ["README.md"] + sorted(
      os.path.join("docs", f) for f in os.listdir(os.path.join(src, "docs"))
      if f.endswith(".md"))
  found = []
  for page in pages:
    variables = {}
    for lang, body in fenced_blocks(os.path.join(src, page)):
      if lang == "python":
        text = "\n".join(t for _, t in body).strip("\n") + "\n"
        first = next(t for _, t in body if t.strip())
        found.append(Command(page, body[0][0], "python: " + first.strip(),
                             text, python=True))
      elif lang in SHELL_LANGS:
        found.extend(shell_commands(page, body, variables))
  return found


class Checker:
  """The checks of a command that do not run it; caches --help listings."""

  def __init__(self, build, src, tmp):
    self.build, self.src, self.tmp = build, src, tmp
    self.helps = {}
    self.missing = set()  # programs not installed, reported once
    self.ctest_names = None
    self.slurm_conf = os.path.join(tmp, "slurm.conf")
    with open(self.slurm_conf, "w") as f:
      # sbatch --help reads a config first; this one names no real cluster.
      f.write("ClusterName=docs\nSlurmctldHost=localhost\n")

  def help_of(self, argv, env=None):
    """(text, --flags listed) of `argv --help` (flags: lines starting -)."""
    key = tuple(argv)
    if key not in self.helps:
      try:
        p = subprocess.run(argv + ["--help"], capture_output=True, text=True,
                           timeout=60, env=env, cwd=self.tmp)
        out = p.stdout + p.stderr
      except (OSError, subprocess.TimeoutExpired) as e:
        out = ""
        print(f"{NAME}: {' '.join(argv)} --help: {e}", file=sys.stderr)
      flags = set()
      for line in out.split("\n"):
        if line.strip().startswith("-"):
          flags.update(re.findall(r"--[\w-]+", line))
      self.helps[key] = (out, flags)
    return self.helps[key]

  def check_flags(self, tokens, argv, what, errors, env=None):
    if not os.path.isabs(argv[0]) and shutil.which(argv[0]) is None:
      # torchrun, sbatch, ctest, cmake: another package's program.
      if argv[0] not in self.missing:
        self.missing.add(argv[0])
        print(f"{NAME}: {argv[0]} is not installed: its own flags are not "
              "checked", file=sys.stderr)
      return
    listed = self.help_of(argv, env)[1]
    if not listed:
      errors.append(f"{what} --help lists no flags")
      return
    for flag in flags_in(tokens):
      if flag not in listed:
        errors.append(f"{flag}: not a flag of {what} (its --help)")

  def check_repo_paths(self, tokens, errors):
    for token in tokens:
      for part in [token.strip("[]|'\"")] + token.split("=", 1)[1:]:
        if part.startswith(REPO_DIRS) and part not in REPO_DIRS:
          if "*" in part or "$" in part:
            continue
          if not os.path.exists(os.path.join(self.src, part)):
            errors.append(f"{part}: no such file in the repository")

  def check_sets(self, sets, config, errors):
    if not sets:
      return
    argv = [os.path.join(self.build, "bin", "xlnet-inspect"), config]
    for s in sets:
      argv += ["--set", s]
    p = subprocess.run(argv, capture_output=True, text=True, cwd=self.tmp)
    if p.returncode != 0:
      last = (p.stderr.strip().splitlines() or ["(no message)"])[-1]
      errors.append(f"xlnet-inspect {config} --set ...: {last}")

  def check_script(self, path, tokens, errors, executable=True):
    full = os.path.join(self.src, path)
    if not os.path.isfile(full):
      errors.append(f"{path}: no such script")
      return None
    if executable and not os.access(full, os.X_OK):
      errors.append(f"{path}: not executable")
    text = open(full, encoding="utf-8").read()
    if path.endswith(".py"):
      try:
        compile(text, full, "exec")
      except SyntaxError as e:
        errors.append(f"{path}: {e}")
    else:
      p = subprocess.run(["bash", "-n", full], capture_output=True, text=True)
      if p.returncode != 0:
        errors.append(f"{path}: bash -n: {p.stderr.strip()}")
    for flag in flags_in(tokens):
      if flag not in text:
        errors.append(f"{flag}: {path} does not mention it")
    return text

  def check_tool(self, tokens, errors):
    """tokens[0] is build/bin/xlnet-*; the rest its arguments."""
    tool = os.path.join(self.build, "bin", os.path.basename(tokens[0]))
    if not os.access(tool, os.X_OK):
      errors.append(f"{tokens[0]}: not built in {self.build}/bin")
      return
    argv = [tool]
    name = os.path.basename(tool)
    # A tool of verbs (usage: xlnet-data VERB [flags]): the verb's --help.
    if re.search(rf"usage: {name} VERB", self.help_of(argv)[0]):
      if len(tokens) < 2 or tokens[1].startswith("-"):
        errors.append(f"{name}: no verb")
        return
      argv.append(tokens[1])
    self.check_flags(tokens[1:], argv, " ".join([name] + argv[1:]), errors)

  def check_ctest(self, tokens, errors):
    self.check_flags(tokens[1:], ["ctest"], "ctest", errors)
    if "-R" in tokens and shutil.which("ctest"):
      name = tokens[tokens.index("-R") + 1]
      if self.ctest_names is None:
        p = subprocess.run(["ctest", "--test-dir", self.build, "-N"],
                           capture_output=True, text=True)
        self.ctest_names = set(re.findall(r"Test\s+#\d+: (\S+)", p.stdout))
      if name not in self.ctest_names:
        errors.append(f"ctest -R {name}: no such test in {self.build}")

  def check(self, command, static_sets):
    """The problems of one command found without running it."""
    errors = []
    if command.python:
      try:
        compile(command.text, command.where(), "exec")
      except SyntaxError as e:
        errors.append(str(e))
      return errors
    env_names = {}
    text = command.text
    m = re.match(rf"^((?:{ASSIGNMENT}\s+)*)", text)
    for assignment in shlex.split(m.group(1)):
      name, value = assignment.split("=", 1)
      env_names[name] = value
    try:
      tokens = shlex.split(text[m.end():])
    except ValueError as e:
      return [f"cannot split into words: {e}"]
    tokens = [t for t in tokens if t not in ("[", "]", "|", "...")]
    self.check_repo_paths(tokens, errors)
    program = tokens[0]
    sets = [tokens[i + 1] for i, t in enumerate(tokens[:-1])
            if t.strip("[") == "--set"]
    sets = [s.rstrip("]") for s in sets]
    config = "configs/tiny.yaml"
    given = []
    if "--config" in tokens:
      given = tokens[tokens.index("--config") + 1:][:1]
    if given and given[0].startswith("configs/"):
      config = given[0]
    if program == "torchrun":
      if "--no_python" not in tokens:
        errors.append("torchrun without --no_python: not one of our tools")
        return errors
      cut = tokens.index("--no_python")
      self.check_flags(tokens[1:cut], ["torchrun"], "torchrun", errors)
      tokens = tokens[cut + 1:]
      program = tokens[0]
    if program == "sbatch":
      env = dict(os.environ, SLURM_CONF=self.slurm_conf)
      self.check_flags(tokens[1:], ["sbatch"], "sbatch", errors, env)
      scripts = [t for t in tokens[1:] if t.startswith("scripts/")]
      if not scripts:
        errors.append("sbatch without a scripts/ job script")
        return errors
      body = self.check_script(scripts[0], [], errors, False) or ""
      for name in env_names:
        if name.startswith("XLNET_") and name not in body:
          errors.append(f"{name}: {scripts[0]} does not read it")
      sets += env_names.get("XLNET_SET", "").split()
      config = env_names.get("XLNET_CONFIG", "configs/xlnet-base.yaml")
    elif program.startswith("build/bin/"):
      self.check_tool(tokens, errors)
    elif program.startswith("build/pyenv/bin/python"):
      self.check_script(tokens[1], tokens[2:], errors, False)
    elif program.startswith(("scripts/", "tests/")):
      self.check_script(program, tokens[1:], errors)
    elif program == "ctest":
      self.check_ctest(tokens, errors)
    elif program == "cmake":
      self.check_flags(tokens[1:], ["cmake"], "cmake", errors)
    else:
      errors.append(f"{program}: no check for this program")
    if static_sets:
      self.check_sets(sets, config, errors)
    return errors


def flags_in(tokens):
  """The --flags among a command's words ([--flag] and --flag=value too)."""
  flags = (t.strip("[]|").split("=", 1)[0] for t in tokens)
  return [f for f in flags if re.fullmatch(r"--[\w-]+", f)]


def make_user_files(names, tmp, src):
  """The files a run needs that a user would bring (commands.USER_FILES)."""
  for name in names:
    path = os.path.join(tmp, name.rstrip("/"))
    if not os.path.exists(path):
      commands.USER_FILES[name](path, src)


def run_entry(entry, command, tmp, python, src):
  """Runs one entry's command; returns (problems, skipped message or None)."""
  if entry["python"] and python is None:
    return [], ("no Python with transformers (XLNET_CHECK_PYTHON; "
                "scripts/setup_python.sh makes BUILD_DIR/pyenv)")
  text = command.text
  for old, new in entry["subst"]:
    if old not in text:
      return [f"substitution {old!r} matches nothing in the command"], None
    text = text.replace(old, new, 1)
  if not command.python:
    # Optional parts left: run with the brackets dropped.
    text = re.sub(r"\[([^\[\]|]*)\]", r"\1", text)
    if entry["python"] and text.startswith(VENV_PYTHON + " "):
      text = shlex.quote(python) + text[len(VENV_PYTHON):]
  if entry["append"]:
    text += " " + entry["append"]
  make_user_files(entry["files"], tmp, src)
  if entry["before"]:
    p = subprocess.run(["bash", "-c", entry["before"]], cwd=tmp,
                       capture_output=True, text=True)
    if p.returncode != 0:
      return [f"before: {entry['before']}: {p.stderr.strip()}"], None
  if command.python:
    script = os.path.join(tmp, "docs_block.py")
    with open(script, "w") as f:
      f.write(text)
    argv = [python, script]
  else:
    argv = ["bash", "-c", text]
  start = time.monotonic()
  try:
    p = subprocess.run(argv, cwd=tmp, capture_output=True, text=True,
                       timeout=RUN_TIMEOUT_S)
  except subprocess.TimeoutExpired:
    return [f"did not end in {RUN_TIMEOUT_S} s: {text}"], None
  seconds = time.monotonic() - start
  output = p.stdout + p.stderr
  problems = []
  if p.returncode != entry["exit"]:
    problems.append(f"exit status {p.returncode}, expected {entry['exit']}")
  for shown in command.shown + list(entry["expect"]):
    if shown not in output:
      problems.append(f"output lacks {shown!r}")
  if problems:
    tail = "\n".join(output.strip().split("\n")[-15:])
    problems = ["; ".join(problems) +
                f"\n  ran: {text}\n----- its output (last lines)\n{tail}"]
  print(f"{NAME}: ran {command.where()} ({seconds:.1f} s)")
  return problems, None


def find_python(build):
  python = os.environ.get("XLNET_CHECK_PYTHON") or os.path.join(
      build, "pyenv", "bin", "python")
  try:
    p = subprocess.run([python, "-c", "import transformers"],
                       capture_output=True, text=True)
  except OSError as e:
    return None, str(e)
  if p.returncode != 0:
    return None, f"{python}: {p.stderr.strip().splitlines()[-1:]}"
  return python, None


def git_status(src):
  try:
    p = subprocess.run(["git", "-C", src, "status", "--porcelain",
                        "--untracked-files=all"], capture_output=True,
                       text=True)
  except OSError:
    return None
  return set(p.stdout.splitlines()) if p.returncode == 0 else None


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("build")
  ap.add_argument("src")
  ap.add_argument("--list", action="store_true",
                  help="print the extracted commands and exit")
  ap.add_argument("--keep", action="store_true",
                  help="keep the temporary directory")
  ap.add_argument("--check_only", action="store_true",
                  help="the table and the checks, no runs (seconds)")
  args = ap.parse_args()
  build, src = os.path.abspath(args.build), os.path.abspath(args.src)

  documented = extract_commands(src)
  if args.list:
    for c in documented:
      print(f"{c.where()}: {c.key}")
    return 0

  failures = []
  by_key = {}
  for c in documented:
    by_key.setdefault(c.key, []).append(c)
  entries = {}
  for entry in commands.ENTRIES:
    if entry["cmd"] in entries:
      failures.append(f"tests/docs/commands.py:{entry['line']}: "
                      f"{entry['cmd']!r}: a second entry")
    entries[entry["cmd"]] = entry
  for c in documented:
    if c.key not in entries:
      failures.append(f"{c.where()}: no entry in tests/docs/commands.py for "
                      f"{c.key!r} (add a run(...) or check(...) entry)")
  for key, entry in entries.items():
    if key not in by_key:
      failures.append(f"tests/docs/commands.py:{entry['line']}: stale entry "
                      f"{key!r}: no such command in README.md or docs/*.md")

  python, why_no_python = find_python(build)
  before = git_status(src)
  tmp = tempfile.mkdtemp(prefix="xlnet_docs_commands_")
  try:
    for d in ("configs", "data", "scripts", "tests"):
      os.symlink(os.path.join(src, d), os.path.join(tmp, d))
    os.symlink(build, os.path.join(tmp, "build"))
    checker = Checker(build, src, tmp)
    runs = checks = skipped = 0
    start = time.monotonic()
    for entry in commands.ENTRIES:
      for c in by_key.get(entry["cmd"], []):
        not_run = entry["reason"] is not None
        for problem in checker.check(c, static_sets=not_run):
          failures.append(f"{c.where()}: {c.key}: {problem}")
        checks += 1
    check_seconds = time.monotonic() - start
    for entry in commands.ENTRIES:
      occurrences = by_key.get(entry["cmd"])
      if entry["reason"] is not None or not occurrences or args.check_only:
        continue
      problems, skip = run_entry(entry, occurrences[0], tmp, python, src)
      if skip:
        skipped += 1
        print(f"{NAME}: {occurrences[0].where()}: not run: {skip}: "
              f"{why_no_python}", file=sys.stderr)
        if os.environ.get("CI"):
          failures.append(f"{occurrences[0].where()}: not run ({skip}); CI "
                          "is set, so that is a failure")
      runs += 1
      for problem in problems:
        failures.append(f"{occurrences[0].where()}: {entry['cmd']}: {problem}")
  finally:
    if args.keep:
      print(f"{NAME}: kept {tmp}")
    else:
      shutil.rmtree(tmp, ignore_errors=True)
  after = git_status(src)
  if before is not None and after is not None and after - before:
    failures.append("the runs changed the source tree: " +
                    ", ".join(sorted(after - before)))

  print(f"{NAME}: {len(documented)} documented commands, {checks} checked "
        f"({check_seconds:.0f} s), {runs - skipped} run "
        f"({time.monotonic() - start - check_seconds:.0f} s), {skipped} "
        "skipped")
  for f in failures:
    print(f"{NAME}: FAILED: {f}", file=sys.stderr)
  return 1 if failures else 0


if __name__ == "__main__":
  sys.exit(main())
