"""The product's text speaks as a product: no diary of issue or session numbers, a changelog for users, a model page
of one reading's length. Dates and the commands that produced each file are the provenance."""

import re

from .conftest import ROOT

DIARY = re.compile(r"(issue|session) ?#?[0-9]", re.I)
TEXT_SUFFIXES = {".py", ".md", ".json", ".txt", ".toml", ".cfg", ".yaml", ".yml"}


def product_text_files():
    """The package's source and data files, the README, the changelog, docs/ and the data cards."""
    files = [p for p in (ROOT / "colopred").rglob("*") if p.is_file() and p.suffix in TEXT_SUFFIXES]
    files += list((ROOT / "docs").rglob("*.md"))
    files += sorted((ROOT / "datasets").glob("*/README.md"))
    files += [ROOT / "README.md", ROOT / "CHANGELOG.md"]
    return files


def test_no_issue_or_session_numbers_in_the_product_text():
    hits = [f"{p.relative_to(ROOT)}:{n}: {m.group(0)!r}"
            for p in product_text_files()
            for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            for m in DIARY.finditer(line)]
    assert not hits, ("say the purpose in words, or the date and command, instead of an issue or session number:\n"
                      + "\n".join(hits))


def test_the_changelog_is_for_users():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    versions = re.findall(r"^## \[([^\]]+)\]", text, re.M)
    assert versions[0] == "Unreleased"
    from colopred import __version__
    assert __version__ in versions  # the package's version has its section
    headings = set(re.findall(r"^### (.+)$", text, re.M))
    assert headings <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}, headings


def test_the_model_page_reads_in_one_sitting():
    assert len((ROOT / "docs" / "model.md").read_text(encoding="utf-8").splitlines()) <= 400
