"""The session's rank server, and the end of the pytest summary.

The server that the tests' ranks fork from (multiproc.py) starts with the
session, before any test changes the environment, and is checked to be
safe to fork: one thread, no CUDA context.

The end of the summary: what did not run, one line per group of skipped
tests (their file and the reason they give) with how many, so that a reader
of CI's log sees at once which coverage a run lacked and why."""
import collections
import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def rank_server():
    import multiproc  # tests/python, on pytest.ini's pythonpath

    threads, cuda = multiproc.start_rank_server()
    assert threads == 1, f"the rank server has {threads} threads: a fork copies only the forking thread"
    assert not cuda, "the rank server made a CUDA context, which its forks cannot use"


def _skip_reason(report):
    # A skip's longrepr is (path, line, "Skipped: reason"); other forms are
    # rare (a skip raised by a plugin) and are named whole.
    if isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:
        reason = str(report.longrepr[2])
    else:
        reason = str(report.longrepr)
    return reason[len("Skipped: "):] if reason.startswith("Skipped: ") else reason


def skipped_groups(reports):
    """(count, file, reason) for each file and reason, most tests first."""
    groups = collections.Counter(
        (os.path.basename(report.nodeid.split("::")[0]), _skip_reason(report)) for report in reports)
    return sorted(((count, where, why) for (where, why), count in groups.items()),
                  key=lambda group: (-group[0], group[1], group[2]))


# The outermost wrapper, its part after the others': the last section
# before the final counts, after pytest's own short summary (-ra).
@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter):
    yield
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if r.when in ("setup", "call")]
    if not skipped:
        return
    groups = skipped_groups(skipped)
    terminalreporter.section(f"not run: {len(skipped)} skipped, in {len(groups)} group(s)")
    for count, where, why in groups:
        terminalreporter.line(f"SKIPPED {count:3d} x {where}: {why}")
