"""``easerve gpu``: import a GPU spec from a file, list the GPU specs easerve finds.

  easerve gpu import FILE [--name NAME] --out SPEC.json
  easerve gpu import --from aiconfigurator --system h200_sxm [--base GPU] [--db PATH] \
      --name NAME --out SPEC.json
  easerve gpu list

``import`` reads a GPU spec (JSON, the fields of calibration/specs/gpus/*.json,
each a plain value or marked ``{"value", "mark", "source"}``), checks every
field and writes it marked: a plain value becomes G ("given in FILE without a
source"). Use it as ``[cluster] gpu = NAME`` with its folder on
``EASERVE_SPEC_PATH`` (``DIR/gpus/NAME.json``).

``import --from aiconfigurator --system S`` reads the GPU from a vendor
table instead: aiconfigurator-core's ``systems/S.yaml`` (the ``measured``
extra) states bandwidth, BF16 tensor FLOPS, memory, the intra-node link and
its latency, and the SM version; those fields are marked V with the YAML
key. What the table does not state (the SM count, the SM-partition
granularity, the link kind and count) comes from ``--base`` (a GPU spec,
default: easerve's spec of the same GPU where there is one), with that
spec's own mark and source.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from calibration import aiconfigurator
from calibration.specs import SPEC_PATH_ENV, GPUSpec, gpu_spec, read_spec_file
from easerve.cli.common import add_out, command_parser
from easerve.cli.model_cmd import print_specs, write_json
from easerve.cli.outputs import check_file

MARKS = "V = read in the cited source; D = derived from V facts; G = guess, re-check"


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = command_parser(subparsers, "gpu", help="import a GPU spec from a file; list GPU specs",
                       doc=__doc__, func=None)
    sub = p.add_subparsers(dest="gpu_command", metavar="ACTION", required=True)
    i = sub.add_parser("import", help="check a GPU spec file and write it marked")
    i.add_argument("file", type=Path, nargs="?", default=None, help="GPU spec JSON (not with --from)")
    i.add_argument("--name", default=None, help="spec name (default: the file's 'name')")
    i.add_argument("--from", dest="source", default=None, choices=["aiconfigurator"],
                   help="read the GPU from a vendor table instead of FILE")
    i.add_argument("--system", default=None, help="the vendor table's system (with --from), e.g. h200_sxm")
    i.add_argument("--base", default=None, help="GPU spec for the fields the table lacks (with --from)")
    i.add_argument("--db", default=None, help="the systems folder (default: the installed package's)")
    add_out(i, "GPU spec JSON to write")
    i.set_defaults(func=run_import)
    ls = sub.add_parser("list", help=f"list GPU specs (shipped and on {SPEC_PATH_ENV})")
    ls.set_defaults(func=run_list)


def marked_gpu(file: Path, name: str | None) -> dict[str, Any]:
    """The marked spec of the GPU in ``file``, checked field by field."""
    if not file.is_file():
        raise ValueError(f"{file}: no such GPU spec file")
    values, provenance = read_spec_file(file)
    if name:
        values["name"] = name
    try:
        GPUSpec.from_dict(values)
    except ValueError as exc:
        raise ValueError(f"{file}: {exc}") from None
    out: dict[str, Any] = {"name": values["name"], "full_name": values.get("full_name", values["name"]),
                           "marks": MARKS}
    for key, item in values.items():
        if key in ("name", "full_name"):
            continue
        mark = provenance.get(key)
        if mark:
            out[key] = {"value": item, "mark": mark[1], "source": mark[4:]}
        else:
            out[key] = {"value": item, "mark": "G", "source": f"given in {file.name} without a source"}
    return out


def run_import(args: argparse.Namespace) -> int:
    if args.out.suffix != ".json":
        raise ValueError(f"--out {args.out}: a GPU spec is a .json file")
    check_file(args.out)
    spec = vendor_gpu(args) if args.source else marked_gpu(_file(args), args.name)
    write_json(args.out, spec)
    gpu = gpu_spec(str(args.out))
    print(f"wrote {args.out}: {gpu.name} ({gpu.full_name}): {gpu.num_sms} SMs, "
          f"{gpu.dense_bf16_flops / 1e12:.0f} TFLOPS BF16, {gpu.mem_bandwidth_bytes_per_s / 1e12:.2f} TB/s, "
          f"{gpu.memory_bytes / 2**30:.0f} GiB")
    return 0


def _file(args: argparse.Namespace) -> Path:
    if args.file is None:
        raise ValueError("gpu import: give a GPU spec FILE, or --from aiconfigurator --system S")
    if args.system or args.base or args.db:
        raise ValueError("--system, --base and --db go with --from aiconfigurator")
    return Path(args.file)


def vendor_gpu(args: argparse.Namespace) -> dict[str, Any]:
    """The marked spec of ``--system``'s GPU from the vendor table, the rest from ``--base``."""
    if args.file is not None:
        raise ValueError("gpu import: give either FILE or --from, not both")
    if not args.system:
        raise ValueError("--system: --from aiconfigurator needs the vendor table's system, e.g. h200_sxm")
    if not args.name:
        raise ValueError("--name: a GPU read from a vendor table needs a spec name")
    db = aiconfigurator.check_db(args.db)
    facts = aiconfigurator.system_gpu(db, args.system)
    base_ref = args.base or aiconfigurator.GPU_OF_SYSTEM.get(args.system)
    if base_ref is None:
        raise ValueError(f"--base: easerve has no spec of {args.system}'s GPU; give --base GPU for the "
                         "fields the vendor table lacks (SM count, partition, link kind and count)")
    base = gpu_spec(str(base_ref))
    base_values = {k: v for k, v in base.to_dict().items() if k not in ("name", "full_name")}
    out: dict[str, Any] = {"name": args.name, "full_name": f"{base.full_name} ({args.system} vendor table)",
                           "marks": MARKS}
    for key, value in base_values.items():
        if key in facts:
            out[key] = {"value": facts[key][0], "mark": "V", "source": facts[key][1]}
        else:
            prov = base.provenance.get(key, "")
            mark, source = (prov[1], prov[4:]) if prov.startswith("[") and prov[2:4] == "] " else ("G", prov)
            out[key] = {"value": value, "mark": mark,
                        "source": f"from the base spec {base.name}: {source or 'no source given'}"}
    GPUSpec.from_dict({k: (v["value"] if isinstance(v, dict) else v) for k, v in out.items() if k != "marks"})
    return out


def _describe(path: str) -> str:
    gpu = gpu_spec(path)
    return f"{gpu.full_name:42} {gpu.num_sms:4} SMs {gpu.mem_bandwidth_bytes_per_s / 1e12:5.2f} TB/s"


def run_list(args: argparse.Namespace) -> int:
    print_specs("gpus", "GPU specs", _describe, width=16)
    return 0
