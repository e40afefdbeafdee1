"""The documentation stays true to the repository: every relative link in the README, docs/
and the benchmark results resolves (the file, and the heading an #anchor names, by GitHub's
rules), every RINGREDUCE_* name the docs mention is one the code reads, every setting the code
reads is on the environment-variables page, and every file in benchmarks/history/ is in that
folder's index. Pure Python: no build, no torch."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
ENV_PAGE = ROOT / "docs" / "ENVIRONMENT.md"


def documentation_files():
    files = [ROOT / "README.md", ROOT / "benchmarks" / "RESULTS.md"]
    files += sorted((ROOT / "docs").glob("*.md"))
    files += sorted((ROOT / "benchmarks" / "history").glob("*.md"))
    return [f for f in files if f.exists()]


def without_code(text):
    """Markdown outside fenced blocks and inline code spans: links and headings there are text."""
    text = re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def github_slug(heading):
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation other than '-' and
    '_' removed, each space a '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors_of(path):
    """Every anchor GitHub makes for a Markdown file's headings (repeats get -1, -2, ...)."""
    seen = {}
    anchors = set()
    text = re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", path.read_text(), flags=re.S | re.M)
    for match in re.finditer(r"^#{1,6}\s+(.*?)\s*#*\s*$", text, flags=re.M):
        slug = github_slug(match.group(1))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def relative_links(path):
    for target in LINK.findall(without_code(path.read_text())):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, flags=re.I):  # http:, https:, mailto:
            continue
        yield target


def broken_links(path):
    broken = []
    for target in relative_links(path):
        file_part, _, anchor = target.partition("#")
        destination = (path.parent / file_part).resolve() if file_part else path
        if not destination.exists():
            broken.append(f"{target}: no such file")
            continue
        if ROOT not in destination.parents and destination != ROOT:
            broken.append(f"{target}: outside the repository")
            continue
        if anchor and destination.suffix == ".md" and anchor not in anchors_of(destination):
            broken.append(f"{target}: no heading with anchor #{anchor} in {destination.name}")
    return broken


@pytest.mark.parametrize("path", documentation_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(path):
    assert broken_links(path) == []


def unindexed_history(history):
    """The Markdown files in `history` that its README.md does not link to."""
    index = history / "README.md"
    linked = {target.partition("#")[0] for target in relative_links(index)}
    return sorted(f.name for f in history.glob("*.md") if f.name != index.name and f.name not in linked)


def test_every_history_file_is_in_the_history_index():
    # A superseded run moved to benchmarks/history/ is found from its index.
    assert unindexed_history(ROOT / "benchmarks" / "history") == []


def test_an_unindexed_history_file_is_found(tmp_path):
    (tmp_path / "README.md").write_text("| [a.md](a.md) | a run |\n`[b.md](b.md)` in code\n")
    for name in ("a.md", "b.md", "c.md"):
        (tmp_path / name).write_text("# A run\n")
    assert unindexed_history(tmp_path) == ["b.md", "c.md"]


def test_slugs_follow_githubs_rules():
    assert github_slug("cma: reducing from the peers' memory") == "cma-reducing-from-the-peers-memory"
    assert github_slug("The device-flags path on an H200 (2026-11-27)") == \
        "the-device-flags-path-on-an-h200-2026-11-27"
    assert github_slug("Torch's own threads") == "torchs-own-threads"
    assert github_slug("`RINGREDUCE_SHM_BYTES` and /dev/shm") == "ringreduce_shm_bytes-and-devshm"


def test_a_broken_link_is_found(tmp_path):
    (tmp_path / "a.md").write_text("# Title\n\n## Some part\n")
    page = tmp_path / "b.md"
    page.write_text("[ok](a.md#some-part) [gone](missing.md) [bad anchor](a.md#nothing) "
                    "`[in code](missing.md)` [web](https://example.com/x)\n")
    found = []
    for target in relative_links(page):
        file_part, _, anchor = target.partition("#")
        destination = page.parent / file_part
        if not destination.exists():
            found.append(target)
        elif anchor and anchor not in anchors_of(destination):
            found.append(target)
    assert found == ["missing.md", "a.md#nothing"]


# Where the code reads a RINGREDUCE_* variable or option: the group settings (config.cpp reads
# every name it holds, through its Sources), getenv elsewhere in csrc/, os.environ in Python,
# $NAME in the scripts, option() and $ENV{} in CMake.
READERS = [
    ("csrc/core/config/config.cpp", r"\"(RINGREDUCE_[A-Z0-9_]+)\""),
    ("csrc/**/*.cpp", r"getenv\(\s*\"(RINGREDUCE_[A-Z0-9_]+)\""),
    ("csrc/**/*.h", r"getenv\(\s*\"(RINGREDUCE_[A-Z0-9_]+)\""),
    ("torch_ringreduce/**/*.py", r"(?:environ(?:\.get)?|getenv)\s*[\[(]\s*[\"'](RINGREDUCE_[A-Z0-9_]+)"),
    # a module constant naming the variable it reads (horovod/elastic.py's STATE_ENV)
    ("torch_ringreduce/**/*.py", r"(?m)^[A-Z_]+_ENV\s*=\s*[\"'](RINGREDUCE_[A-Z0-9_]+)"),
    ("tests/**/*.py", r"(?:environ(?:\.get)?|getenv)\s*[\[(]\s*[\"'](RINGREDUCE_[A-Z0-9_]+)"),
    ("benchmarks/*.py", r"(?:environ(?:\.get)?|getenv)\s*[\[(]\s*[\"'](RINGREDUCE_[A-Z0-9_]+)"),
    ("setup.py", r"(?:environ(?:\.get)?|getenv)\s*[\[(]\s*[\"'](RINGREDUCE_[A-Z0-9_]+)"),
    ("scripts/*.sh", r"\$\{?(RINGREDUCE_[A-Z0-9_]+)"),
    ("CMakeLists.txt", r"option\((RINGREDUCE_[A-Z0-9_]+)"),
    ("cmake/*.cmake", r"(?:option\(|\$ENV\{)(RINGREDUCE_[A-Z0-9_]+)"),
]


def names_read_by_the_code():
    names = set()
    for pattern, regex in READERS:
        for path in ROOT.glob(pattern):
            names.update(re.findall(regex, path.read_text(errors="replace")))
    return names


def runtime_settings():
    """What a running rank reads: config.cpp's settings and every getenv in csrc/."""
    names = set()
    for pattern, regex in READERS[:3]:
        for path in ROOT.glob(pattern):
            names.update(re.findall(regex, path.read_text(errors="replace")))
    return names


def test_the_code_readers_are_found():
    settings = runtime_settings()
    # One of each kind of reader, so that a change in how the code reads them fails here
    # rather than emptying the checks below.
    for name in ("RINGREDUCE_SHM_BYTES", "RINGREDUCE_CONFIG", "RINGREDUCE_TIMELINE",
                 "RINGREDUCE_DEBUG", "RINGREDUCE_TRACE_DIR", "RINGREDUCE_NCCL_LIBRARY"):
        assert name in settings
    assert {"RINGREDUCE_UCX_ROOT", "RINGREDUCE_WITH_CUDA", "RINGREDUCE_GPU_PHASES"} <= \
        names_read_by_the_code()


def test_every_name_the_docs_mention_is_read_by_the_code():
    known = names_read_by_the_code()
    unknown = {}
    for path in documentation_files():
        for name in set(re.findall(r"RINGREDUCE_[A-Z0-9_]*[A-Z0-9]", path.read_text())):
            if name not in known:
                unknown.setdefault(name, []).append(str(path.relative_to(ROOT)))
    assert unknown == {}


def test_every_setting_the_code_reads_is_on_the_environment_page():
    page = ENV_PAGE.read_text()
    documented = set(re.findall(r"RINGREDUCE_[A-Z0-9_]*[A-Z0-9]", page))
    assert sorted(runtime_settings() - documented) == []
