"""Profile files: a :class:`~easerve_core.profile.ProfileDoc` read from and written to JSON.

The core checks the data (``ProfileDoc.from_json_dict``, which refuses another
format or version, or a missing field, naming what is wrong) and gives it
(``to_json_dict``); this module reads and writes the file, atomically.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from easerve_core.profile import ProfileDoc
from runtime.files import read_json, write_text_atomic


def save_profile_doc(doc: ProfileDoc, path: str | os.PathLike[str]) -> Path:
    """Write ``doc`` as JSON, atomically (a crash never leaves half a file)."""
    return write_text_atomic(path, json.dumps(doc.to_json_dict(), indent=2, sort_keys=True) + "\n")


def load_profile_doc(path: str | os.PathLike[str]) -> ProfileDoc:
    """Read and validate a profile JSON file."""
    return ProfileDoc.from_json_dict(read_json(path, what="profile"), where=str(path))
