"""Shared fixtures: the real data files.

Tests that read the real datasets ask for them through `require_dataset(name)` (or the `data_dir` fixture
for all of them). A missing file skips the test with the reason (the FileNotFoundError of the loader,
which names the file and the `pfwcp-data fetch` command); under PFWCP_REQUIRE_DATA=1 it fails instead,
so a run that is meant to use the data cannot pass by skipping."""
import os

import pytest

from pfwcp_nb import data as D


def _unavailable(reason: str):
    if os.environ.get("PFWCP_REQUIRE_DATA") == "1":
        pytest.fail(f"PFWCP_REQUIRE_DATA=1 but {reason}")
    pytest.skip(f"real data not available: {reason}")


@pytest.fixture
def require_dataset():
    "A function `require(name)`: the data directory if dataset `name`'s files are there, else skip (or fail)."
    def require(name: str):
        try:
            D.data_path(name)
        except FileNotFoundError as e:
            _unavailable(str(e))
        return D.resolve_data_dir()
    return require


@pytest.fixture
def data_dir(require_dataset):
    "The data directory, when it holds the files of every real dataset (else skip, or fail under PFWCP_REQUIRE_DATA=1)."
    for name in D.DATA_FILES:
        root = require_dataset(name)
    return root
