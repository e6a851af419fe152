"""The package's error names are the C++ table's (reference/error_codes.h), and ERROR_NAMES
lists exactly the names the writer raises."""

from __future__ import annotations

import glob
import os
import re
import unittest

from ncert_dump import errors

from .support import REPO

# One row of reference/error_codes.h: NCERT_ERROR_CODE(kName, number, "name", exit, ... (a long
# row is wrapped after the parenthesis by clang-format).
ROW = re.compile(r'^NCERT_ERROR_CODE\(\s*(k\w+), (\d+), "([a-z0-9-]+)", (\d+),', re.M)


def table_rows():
    """(number, name) of every row of the C++ table, read as text (kOk excluded)."""
    with open(os.path.join(REPO, "reference", "error_codes.h")) as f:
        rows = [(int(m.group(2)), m.group(3)) for m in ROW.finditer(f.read())]
    return [r for r in rows if r[0] != 0]


def names_in_sources():
    """Every string literal in the package (errors.py aside) that is an error name: its modules
    raise some names themselves and take others from the reader's rule table (schema_rules.json)."""
    found: set[str] = set()
    package = os.path.dirname(errors.__file__)
    for path in glob.glob(os.path.join(package, "*.py")) + glob.glob(os.path.join(package, "*.json")):
        if os.path.basename(path) == "errors.py":
            continue
        with open(path) as f:
            found.update(s for s in re.findall(r'"([a-z0-9-]+)"', f.read()) if s in errors.ERROR_CODES)
    return found


class ErrorNames(unittest.TestCase):
    def test_error_codes_are_the_cxx_table_in_its_order(self):
        rows = table_rows()
        self.assertGreater(len(rows), 50)
        self.assertEqual(list(errors.ERROR_CODES.items()), [(name, number) for number, name in rows])

    def test_error_names_take_their_numbers_from_the_table(self):
        for name, number in errors.ERROR_NAMES.items():
            self.assertEqual(errors.ERROR_CODES[name], number, name)

    def test_error_names_are_the_names_the_writer_raises(self):
        # Both directions: a name raised but not listed would trip DumpFormatError's own check,
        # a name listed but never raised is a stale entry.
        self.assertEqual(names_in_sources(), set(errors.ERROR_NAMES))

    def test_an_unknown_name_is_refused(self):
        with self.assertRaises(AssertionError):
            errors.DumpFormatError("no-such-error", "/x", "message")
        self.assertEqual(errors.DumpFormatError("shape-mismatch", "/x", "m").code, 224)


if __name__ == "__main__":
    unittest.main()
