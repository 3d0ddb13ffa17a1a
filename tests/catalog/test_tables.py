"""The CSV reader's errors name the file, line and column; empty cells are "unknown", never 0."""

from __future__ import annotations

import pytest

from gpuwarden.catalog.tables import Row, read_rows
from gpuwarden.errors import CorruptInputError


def _row(**cells: str) -> Row:
    return Row("gpus.csv", 7, cells)


def test_empty_cells_are_none() -> None:
    row = _row(tdp_w="", name="A100")
    assert row.number("tdp_w") is None
    assert row.count("tdp_w") is None
    assert row.items("tdp_w") == ()
    assert row.text("name") == "A100"


@pytest.mark.parametrize("bad", ["abc", "0", "-5", "inf", "nan"])
def test_bad_numbers_name_the_cell(bad: str) -> None:
    with pytest.raises(CorruptInputError, match=r"gpus\.csv line 7, column 'tdp_w'") as info:
        _row(tdp_w=bad).number("tdp_w")
    assert info.value.reference == "catalog-data-corrupt"


def test_required_cells() -> None:
    with pytest.raises(CorruptInputError, match="'source': is empty"):
        _row(source=" ").text("source")
    with pytest.raises(CorruptInputError, match="whole number"):
        _row(gpu_count="2.5").count("gpu_count")
    assert _row(smi_names="a; b;").items("smi_names") == ("a", "b")


def test_missing_columns_are_reported() -> None:
    with pytest.raises(CorruptInputError, match="no_such_column"):
        list(read_rows("gpus.csv", ("key", "no_such_column")))
