"""The hostile-client probes (issue 23): black-box, each counting its tries."""

from tests.probes.summary import summary_lines


def pytest_terminal_summary(terminalreporter):
    lines = summary_lines()
    if lines:
        terminalreporter.section("probe counts")
        for line in lines:
            terminalreporter.write_line(line)
