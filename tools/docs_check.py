#!/usr/bin/env python3
"""The docs check (ctest docs_numbers): numbers the documentation states about what `servesim inspect` or `servesim
run` print (pool sizes, block sizes, weights, tokens...) are compared with the binary's answers, so a change of the
model that moves them fails a test instead of leaving the prose behind. Python 3 standard library only.

A statement is checked when an HTML comment follows its paragraph or table (a blank line ends a paragraph):

    The full model's pool: 12.72 GiB, 92,624 tokens.
    <!-- check: inspect --model Qwen3-4B --gpu rtx3090 --max-model-len 16384
         => kv_cache_memory_bytes:GiB=12.72 kv_cache_tokens=92,624 -->

The command before `=>` is run as `servesim COMMAND --format json`; each `PATH[:UNIT]=VALUE` reads PATH from the
JSON (keys and list indices joined by dots, e.g. `experiments.0.kv_cache_tokens`), divides it by UNIT (GiB, MiB,
KiB, GB, k) and compares it with VALUE rounded to VALUE's own decimals (thousands separators allowed). VALUE must
also appear, as written, in the paragraph the comment follows: the prose and the check cannot say different things.

Usage: docs_check.py --servesim BUILD/tools/servesim [--plant-drift] (--root DIR | FILE.md...)
--root checks every tracked-looking markdown file under DIR (not .git, build*, out) that holds a check comment.
--plant-drift changes the first checked value of the first file (its last digit, in the prose and the comment alike)
in memory and succeeds only if the check then fails: the check's own test that it can fail.
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys

# At a line start, indented at most 3 spaces: a comment indented further is in a code block (an example, not a check).
CHECK = re.compile(r"^ {0,3}<!--\s*check:\s*(.*?)\s*=>\s*(.*?)\s*-->", re.S | re.M)
UNITS = {"GiB": 2.0 ** 30, "MiB": 2.0 ** 20, "KiB": 2.0 ** 10, "GB": 1e9, "k": 1e3}


def paragraph_before(text, pos):
    """The paragraph (or table) that ends where the comment at `pos` starts."""
    start = text.rfind("\n\n", 0, pos)
    return text[start + 2 if start >= 0 else 0:pos]


def lookup(doc, path):
    node = doc
    for part in path.split("."):
        if isinstance(node, list):
            node = node[int(part)]
        else:
            node = node[part]
    return node


def run_json(servesim, command, cache):
    if command not in cache:
        args = [servesim] + shlex.split(command) + ["--format", "json"]
        done = subprocess.run(args, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError("`%s` failed (status %d): %s" % (" ".join(args), done.returncode, done.stderr.strip()))
        cache[command] = json.loads(done.stdout)
    return cache[command]


def check_text(name, text, servesim, cache):
    """The mismatches of one markdown text, as messages; and the number of values checked."""
    problems, checked = [], 0
    for m in CHECK.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        command, claims = " ".join(m.group(1).split()), m.group(2).split()
        prose = paragraph_before(text, m.start())
        try:
            doc = run_json(servesim, command, cache)
        except (RuntimeError, json.JSONDecodeError) as e:
            problems.append("%s:%d: %s" % (name, line, e))
            continue
        for claim in claims:
            key, _, stated = claim.partition("=")
            path, _, unit = key.partition(":")
            if not stated or (unit and unit not in UNITS):
                problems.append("%s:%d: cannot read '%s'; expected PATH[:UNIT]=VALUE, UNIT one of %s"
                                % (name, line, claim, ", ".join(UNITS)))
                continue
            checked += 1
            if stated not in prose:
                problems.append("%s:%d: %s is checked but the paragraph above does not state it" % (name, line, stated))
            try:
                actual = float(lookup(doc, path)) / UNITS.get(unit, 1.0)
            except (KeyError, IndexError, ValueError, TypeError):
                problems.append("%s:%d: `servesim %s` has no number at '%s'" % (name, line, command, path))
                continue
            decimals = len(stated.split(".")[1]) if "." in stated else 0
            want = float(stated.replace(",", ""))
            if abs(round(actual, decimals) - want) > 1e-9 * max(1.0, abs(want)):
                problems.append("%s:%d: the text says %s=%s but `servesim %s` gives %.*f"
                                % (name, line, key, stated, command, decimals, actual))
    return problems, checked


def plant_drift(text):
    """The text with the first checked value's last digit changed (prose and comment alike)."""
    m = CHECK.search(text)
    if not m:
        return None
    claim = m.group(2).split()[0]
    stated = claim.partition("=")[2]
    digit = stated.rstrip()[-1]
    drifted = stated[:-1] + str((int(digit) + 1) % 10)
    prose_start = text.rfind("\n\n", 0, m.start())
    prose_start = prose_start + 2 if prose_start >= 0 else 0
    head, prose, rest = text[:prose_start], text[prose_start:m.start()], text[m.start():]
    return head + prose.replace(stated, drifted, 1) + rest.replace("=" + stated, "=" + drifted, 1)


def markdown_with_checks(root):
    """Markdown files under root that hold a check comment, in a fixed order."""
    found = []
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if not x.startswith((".", "build")) and x != "out")
        for f in sorted(files):
            if f.endswith(".md"):
                path = os.path.join(d, f)
                with open(path, encoding="utf-8") as fh:
                    if CHECK.search(fh.read()):
                        found.append(path)
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--servesim", required=True)
    ap.add_argument("--plant-drift", action="store_true")
    ap.add_argument("--root")
    ap.add_argument("files", nargs="*")
    a = ap.parse_args()
    if a.root:
        a.files += markdown_with_checks(a.root)
    if not a.files:
        ap.error("give --root DIR or markdown files")
    cache = {}
    if a.plant_drift:
        with open(a.files[0], encoding="utf-8") as f:
            text = plant_drift(f.read())
        if text is None:
            print("docs_check: %s has no check to plant a drift in" % a.files[0], file=sys.stderr)
            return 1
        problems, _ = check_text(a.files[0] + " (drift planted)", text, a.servesim, cache)
        for p in problems:
            print(p)
        print("docs_check: the planted drift was %s" % ("caught" if problems else "NOT caught"))
        return 0 if problems else 1
    problems, checked = [], 0
    for path in a.files:
        with open(path, encoding="utf-8") as f:
            p, n = check_text(path, f.read(), a.servesim, cache)
        problems += p
        checked += n
    for p in problems:
        print(p, file=sys.stderr)
    print("docs_check: %d values in %d files checked against servesim, %d mismatches"
          % (checked, len(a.files), len(problems)))
    if checked == 0:
        print("docs_check: nothing was checked (no <!-- check: ... --> comment)", file=sys.stderr)
        return 1
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
