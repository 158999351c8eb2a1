"""The bounded reading of documents (``archlab.documents``): a file of exactly the bound is read,
one byte more is refused with an ``OSError`` naming the file and the bound, and a file that
never ends (``/dev/zero``) stops at the bound. The bound is lowered for the test, so nothing here
reads 256 MiB."""

from __future__ import annotations

import errno

import pytest

from archlab import documents


@pytest.fixture
def small_bound(monkeypatch):
    monkeypatch.setattr(documents, "MAX_DOCUMENT_BYTES", 1024)
    return 1024


def test_a_document_of_exactly_the_bound_is_read_whole(tmp_path, small_bound):
    path = tmp_path / "spec.toml"
    path.write_bytes(b"x" * small_bound)
    assert documents.read_bytes(path) == b"x" * small_bound
    assert documents.read_text(path) == "x" * small_bound


def test_one_byte_over_the_bound_is_refused_naming_the_file(tmp_path, small_bound):
    path = tmp_path / "spec.toml"
    path.write_bytes(b"x" * (small_bound + 1))
    with pytest.raises(documents.DocumentTooLarge) as refused:
        documents.read_bytes(path)
    assert isinstance(refused.value, OSError) and refused.value.errno == errno.EFBIG
    assert refused.value.filename == str(path)
    assert refused.value.strerror == "more than 1024 bytes, the most the lab reads of a file it parses whole"


def test_a_file_that_never_ends_stops_at_the_bound(small_bound):
    with pytest.raises(documents.DocumentTooLarge):
        documents.read_bytes("/dev/zero")


def test_text_is_utf8_and_undecodable_bytes_follow_errors(tmp_path, small_bound):
    path = tmp_path / "table.txt"
    path.write_bytes("héllo".encode() + b"\xff")
    with pytest.raises(UnicodeDecodeError):
        documents.read_text(path)
    assert documents.read_text(path, errors="replace") == "héllo\ufffd"


def test_missing_files_and_directories_raise_open_s_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        documents.read_bytes(tmp_path / "nope.toml")
    with pytest.raises(IsADirectoryError):
        documents.read_bytes(tmp_path)
