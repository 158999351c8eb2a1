"""Reading the documents a user hands the lab to be parsed whole: experiment specs, simulation
models, claims files, result tables, small CSV, JSON and text result files. Each is read up to
:data:`MAX_DOCUMENT_BYTES` and no further, so that a wrong path (``/dev/zero``, a multi-gigabyte
log, a pipe that never ends) ends in one line naming the file instead of taking the machine's
memory. Streams (JTL files, HDR logs, raw records) are not documents: the Rust readers go
through them in bounded chunks.
"""

from __future__ import annotations

import errno
from pathlib import Path

#: The most the lab reads of one document. A spec or a claims file takes kilobytes; a model
#: with an arrival trace of a million times takes about 20 MB of TOML.
MAX_DOCUMENT_BYTES = 256 * 2**20


class DocumentTooLarge(OSError):
    """A document goes on past :data:`MAX_DOCUMENT_BYTES`. An :class:`OSError`, so that the
    callers' handling of unreadable files (which quote ``strerror``) covers it."""

    def __init__(self, path: str | Path):
        bound = MAX_DOCUMENT_BYTES
        size = f"{bound // 2**20} MiB" if bound % 2**20 == 0 else f"{bound} bytes"
        super().__init__(errno.EFBIG, f"more than {size}, the most the lab reads of a file it parses whole", str(path))


def read_bytes(path: str | Path) -> bytes:
    """The bytes of the document at ``path``; :class:`DocumentTooLarge` past the bound, and
    the :class:`OSError` of ``open`` for a missing or unreadable file."""
    with open(path, "rb") as handle:
        data = handle.read(MAX_DOCUMENT_BYTES + 1)
    if len(data) > MAX_DOCUMENT_BYTES:
        raise DocumentTooLarge(path)
    return data


def read_text(path: str | Path, *, errors: str = "strict") -> str:
    """The document at ``path`` as UTF-8 text (``errors`` as in :meth:`bytes.decode`)."""
    return read_bytes(path).decode("utf-8", errors)
