"""What ``sds`` prints: tables laid out for a pipe or a log (sds_release/flows/console.py)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from sds_release.flows.console import plain_table


def test_plain_table_keeps_every_cell_whole_on_one_line() -> None:
    """A plain table drops markup and boxes, aligns columns, and cuts or wraps no cell."""
    table = Table("stage", "result", "detail", "n")
    table.columns[3].justify = "right"
    table.add_row("publish", "[green]match[/]", "every file\nidentical", "7")
    long = " ".join(["a long detail"] * 8)  # 111 characters
    table.add_row("ε-split", Text("differs"), long, "1234")
    lines = plain_table(table)
    assert lines[0] == "stage    result   detail" + " " * 105 + "     n"
    assert lines[1] == "publish  match    every file identical" + " " * 91 + "     7"
    assert lines[2] == f"ε-split  differs  {long}  1234"
