"""What only tests use lives in `session_awareness.testing`, not in the product: the product
stays what the service runs, and a helper cannot be mistaken for an API."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Helpers no product code calls: reading a stored payload back, replaying the store into row
#: changes, rebuilding the read models from them and listing every row.
TEST_ONLY = ("from_dict", "replayed_changes", "replace_read_models", "read_model_rows")


def test_the_test_only_helpers_are_defined_in_the_testing_package_alone() -> None:
    """R-R2: the rebuild tests compare with is the testing package's; the product has none."""
    defined = sorted(
        f"{path.relative_to(ROOT)}:{name}"
        for folder in ("domain", "application", "infrastructure", "src")
        for path in (ROOT / folder).rglob("*.py")
        for name in TEST_ONLY
        if re.search(rf"^\s*def {name}\(", path.read_text(), flags=re.MULTILINE)
    )
    testing = "src/session_awareness/testing/read_models.py"
    assert defined == sorted(
        f"{testing}:{name}"
        for name in ("read_model_rows", "replace_read_models", "replayed_changes")
    )
