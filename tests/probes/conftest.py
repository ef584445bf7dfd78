"""The hostile-client probes (issue 23): black-box, each counting its tries."""

from tests.probes.summary import COUNTS_FILE, summary_lines


def pytest_sessionstart(session):
    """The counts file holds this run's counts only."""
    COUNTS_FILE.unlink(missing_ok=True)


def pytest_terminal_summary(terminalreporter):
    lines = summary_lines()
    if lines:
        terminalreporter.section("probe counts")
        for line in lines:
            terminalreporter.write_line(line)
