"""``easerve model``: import a model spec from its config.json, list the specs easerve finds.

  easerve model import PATH [--name NAME] [--hf-id ID] [--modality M] --out SPEC.json
  easerve model list

``import`` reads PATH (a model folder or its ``config.json``; the folder's
``preprocessor_config.json`` too) with transformers, offline, and writes a
spec whose every number is marked V (read from the file, key named), D
(derived, arithmetic shown) or G (guessed); what the cost model has no rule
for is listed under ``unmodelled`` (docs/models.md). Use the spec as
``[model] spec = "SPEC.json"``, or put it in ``DIR/models/`` with DIR on
``EASERVE_SPEC_PATH`` and name it. ``list`` shows every spec found and where.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from calibration.importers import import_model as build_spec
from calibration.importers import known_types
from calibration.specs import SPEC_PATH_ENV, model_spec, spec_dirs, spec_files
from easerve.cli.common import add_out, command_parser
from easerve.cli.outputs import check_file


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = command_parser(subparsers, "model", help="import a model spec from config.json; list model specs",
                       doc=__doc__, func=None)
    sub = p.add_subparsers(dest="model_command", metavar="ACTION", required=True)
    i = sub.add_parser("import", help="write a model spec from a transformers config.json")
    i.add_argument("path", type=Path, help="model folder or config.json")
    i.add_argument("--name", default=None, help="spec name (default: the --out file's stem)")
    i.add_argument("--hf-id", default=None, help="the model's hub id, recorded in the spec")
    i.add_argument("--modality", default=None, choices=("image", "video", "audio"),
                   help="the items requests carry (default: the family's first)")
    add_out(i, "model spec JSON to write")
    i.set_defaults(func=run_import)
    ls = sub.add_parser("list", help=f"list model specs (shipped and on {SPEC_PATH_ENV})")
    ls.set_defaults(func=run_list)


def spec_text(data: dict[str, Any]) -> str:
    """A spec as the hand-written ones are laid out: one line per marked value."""
    lines = []
    for key, item in data.items():
        if isinstance(item, dict) and not ("value" in item and "mark" in item):
            inner = [f"    {json.dumps(k)}: {json.dumps(v)}" for k, v in item.items()]
            lines.append(f"  {json.dumps(key)}: {{\n" + ",\n".join(inner) + "\n  }")
        else:
            lines.append(f"  {json.dumps(key)}: {json.dumps(item)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` whole: to a temporary file beside ``path``, then renamed over it."""
    check_file(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(spec_text(data))
    os.replace(tmp, path)


def run_import(args: argparse.Namespace) -> int:
    if args.out.suffix != ".json":
        raise ValueError(f"--out {args.out}: a model spec is a .json file")
    check_file(args.out)
    spec = build_spec(args.path, name=args.name or args.out.stem, hf_id=args.hf_id, modality=args.modality)
    write_json(args.out, spec)
    loaded = model_spec(str(args.out))
    lm = loaded.lm
    print(f"wrote {args.out}: {loaded.name} ({spec['imported_from']['family']}, {loaded.modality}); "
          f"LM {lm.params / 1e9:.2f} B params ({lm.active_params / 1e9:.2f} B active), "
          f"encoder {loaded.encoder.params / 1e6:.0f} M; takes {', '.join(loaded.modalities)}; "
          f"{_context(loaded.max_context_tokens)}")
    for note in spec["unmodelled"]:
        print(f"  not modelled: {note}")
    return 0


def print_specs(kind: str, title: str, describe: Callable[[str], str], *, width: int) -> dict[str, Path]:
    """List the ``kind`` specs found (``describe`` of each path, or why it is unreadable); the found."""
    found = spec_files(kind)
    print(f"{title} (searched: {', '.join(str(d) for d in spec_dirs(kind))})")
    for name, path in sorted(found.items()):
        try:
            what = describe(str(path))
        except ValueError as exc:
            what = f"unreadable: {exc}"
        print(f"  {name:{width}} {what}  {path}")
    return found


def _context(tokens: int) -> str:
    return f"context {tokens:,}" if tokens else "context unsaid"


def _describe(path: str) -> str:
    spec = model_spec(path)
    return (f"{spec.modality:5}  LM {spec.lm.params / 1e9:7.2f} B  takes {'+'.join(spec.modalities):11}  "
            f"{_context(spec.max_context_tokens):18}")


def run_list(args: argparse.Namespace) -> int:
    found = print_specs("models", "model specs", _describe, width=32)
    shadowed = [p for d in spec_dirs("models") if d.is_dir() for p in sorted(d.glob("*.json"))
                if found.get(p.stem) not in (None, p)]
    for path in shadowed:
        print(f"  (shadowed by an earlier folder: {path})")
    print(f"importable model types: {', '.join(known_types())}")
    return 0
