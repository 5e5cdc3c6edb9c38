"""The repository stands on its own (issue #64): no tracked file points at a file a clone does not
have. Papers are cited by author and year (docs/REFERENCES.md), the language's rules are in
docs/LANGUAGE.md; neither the product specification nor the paper files kept beside the repository
may be cited, by path, by section or by file number.

The forbidden forms are built from pieces, so that this file does not match them itself.
"""

from __future__ import annotations

import re
import shutil
import subprocess

from tests.conftest import ROOT, need

FORBIDDEN = re.compile("|".join([
    re.escape(".." + "/" + "shared"),  # the folder beside the repository
    re.escape("SPEC" + " §"),  # a section of the specification
    re.escape("SPEC" + ".md"),  # the specification itself
    "paper" + r"\s+00\d",  # a paper by the number of its file
]), re.IGNORECASE)


def tracked_files() -> list[str]:
    """The repository's tracked files (`git ls-files`), relative to its root."""
    need(None if shutil.which("git") else "git is not installed", "the self-containment test")
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True)
    need(None if listed.returncode == 0 else "not a git checkout: " + listed.stderr.decode(errors="replace"),
         "the self-containment test")
    return [name for name in listed.stdout.decode().split("\0") if name]


def offences(name: str, text: str) -> list[str]:
    return [f"{name}:{number}: {line.strip()[:160]}"
            for number, line in enumerate(text.splitlines(), 1) if FORBIDDEN.search(line)]


def test_no_tracked_file_points_outside_the_repository():
    found = []
    for name in tracked_files():
        path = ROOT / name
        if not path.is_file():  # deleted in the work tree, not yet in the index
            continue
        data = path.read_bytes()
        if b"\0" in data:  # binary: an image, a compiled file
            continue
        found += offences(name, data.decode("utf-8", errors="replace"))
    assert not found, ("files citing what a clone does not have (cite docs/LANGUAGE.md, or a paper by its key "
                       "in docs/REFERENCES.md):\n" + "\n".join(found))


def test_the_forbidden_forms_are_caught():
    """Each form, in any case, and what is allowed is not caught."""
    for text in (".." + "/shared/papers/003.txt", "see SPEC" + " §6", "Spec" + ".md", "(Paper" + " 002's model)",
                 "spec" + " §4", "paper" + "  004"):
        assert offences("x", text) == [f"x:1: {text}"], text
    for text in ("Zhou et al.", "docs/LANGUAGE.md, \"Results\"", "SPEC_PREFIX = 'topic:'", "paper 2019",
                 "shared/", "the spec's"):
        assert offences("x", text) == [], text
