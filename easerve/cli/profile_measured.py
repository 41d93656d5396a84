"""``easerve profile build`` and ``easerve profile fit-roofline``: profiles from measured kernels.

  easerve profile build --from aiconfigurator --system h200_sxm --engine vllm --model M --out P.json
      [--engine-version V] [--db PATH] [--gpu G] [--tp N]
  easerve profile build --from vidur --path DIR --model M --gpu G --out P.json [--tp N]
  easerve profile fit-roofline --gpu h200 --from aiconfigurator [--system S] [--engine E] [--db PATH]
      [--out FILE]

``build`` writes a ``measured`` profile: every op the database holds (GEMMs,
context, generation and ViT attention, all-reduce) is read from it, the rest
(element-wise passes, the patch embedding) priced by the roofline. ``--from
vidur`` reads Vidur's ``mlp.csv`` and ``attention.csv`` from ``--path``
(:mod:`calibration.vidur`: the LM's four GEMMs, prefill and decode attention); ``profile
show`` lists the source per op. ``fit-roofline`` fits the roofline's
constants of one GPU to the database and prints the per-op error before and
after; with ``--out`` it writes the fitted constants with their provenance
(the committed ones live in ``calibration/specs/fitted/``). Background:
docs/profiles.md, "Measured profiles" and "The roofline fitted".
"""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

from calibration import aiconfigurator, model_names, vidur
from calibration.registry import measured_doc
from calibration.roofline_fit import fit_roofline, fitted_constants_doc, fitted_efficiency, write_fitted
from calibration.specs import gpu_names, gpu_spec, model_spec
from easerve.cli.common import add_out
from easerve.cli.outputs import check_file
from runtime.profiles import save_profile_doc

#: measured sources ``--from`` knows
SOURCES = ("aiconfigurator", "vidur")


def register(sub: argparse._SubParsersAction, check_lm_tp: object) -> None:  # type: ignore[type-arg]
    b = sub.add_parser("build", help="write a measured profile from a kernel database")
    _add_source(b)
    b.add_argument("--system", default=None,
                   help="aiconfigurator: the database's GPU system (e.g. h200_sxm, h100_sxm)")
    b.add_argument("--path", type=Path, default=None,
                   help="vidur: the folder holding mlp.csv and attention.csv")
    b.add_argument("--model", required=True, help=f"one of: {', '.join(model_names())} (or a spec *.json)")
    b.add_argument("--gpu", default=None, help="easerve's GPU spec (default: the system's)")
    b.add_argument("--tp", type=int, default=2, help="Prefill/Decode TP 'profile show' reports (default 2)")
    add_out(b, "profile JSON to write")
    b.set_defaults(func=run_build, check_lm_tp=check_lm_tp)
    f = sub.add_parser("fit-roofline", help="fit the roofline's constants of a GPU to a kernel database")
    _add_source(f)
    f.add_argument("--gpu", required=True, help=f"one of: {', '.join(gpu_names())}")
    f.add_argument("--system", default=None, help="the database's system (default: the GPU's)")
    f.add_argument("--out", type=Path, default=None, help="write the fitted constants (JSON) here")
    f.set_defaults(func=run_fit_roofline)


def _add_source(p: argparse.ArgumentParser) -> None:
    p.add_argument("--from", dest="source", required=True, help=f"measured source: {', '.join(SOURCES)}")
    p.add_argument("--engine", default="vllm",
                   help=f"one of: {', '.join(aiconfigurator.ENGINES)} (default vllm)")
    p.add_argument("--engine-version", default=None,
                   help="the engine version's tables (default: newest held)")
    p.add_argument("--db", type=Path, default=None,
                   help="the database's systems folder (default: the installed aiconfigurator-core's)")


def _check_source(source: str) -> None:
    if source not in SOURCES:
        raise ValueError(f"unknown --from {source!r}; known: {', '.join(SOURCES)}")


def _gpu_of(system: str) -> str:
    gpu = aiconfigurator.GPU_OF_SYSTEM.get(system)
    if gpu is None:
        raise ValueError(f"no easerve GPU spec is known for system {system!r}: give --gpu")
    return gpu


def run_build(args: argparse.Namespace) -> int:
    _check_source(args.source)
    args.check_lm_tp(args.model, args.tp)
    check_file(args.out)
    if args.source == "vidur":
        return _build_vidur(args)
    if args.system is None:
        raise ValueError("--from aiconfigurator needs --system (e.g. h200_sxm)")
    db = aiconfigurator.check_db(args.db)
    version = aiconfigurator.resolve(db, args.system, args.engine, args.engine_version)
    gpu = args.gpu or _gpu_of(args.system)
    tables = aiconfigurator.load_tables(args.system, args.engine, version, db)
    database = {"source": "aiconfigurator", "package": aiconfigurator.PINNED, "system": args.system,
                "engine": args.engine, "engine_version": version}
    # ops the tables lack are priced by the roofline: the GPU's fitted constants when committed
    doc = measured_doc(args.model, gpu, tables, database, lm_tp=args.tp, created=dt.date.today().isoformat(),
                       efficiency=fitted_efficiency(gpu))
    save_profile_doc(doc, args.out)
    print(f"wrote measured profile {args.model} on {gpu} ({tables.source}, tp={args.tp}) to {args.out}")
    return 0


def _build_vidur(args: argparse.Namespace) -> int:
    if args.path is None:
        raise ValueError("--from vidur needs --path DIR (the folder holding mlp.csv and attention.csv)")
    if args.gpu is None:
        raise ValueError("--from vidur needs --gpu (the GPU the CSVs were timed on)")
    gpu_spec(args.gpu)  # refuse an unknown GPU before reading
    tables = vidur.load_tables(args.path, model_spec(args.model), args.gpu)
    database = {"source": "vidur", "path": str(args.path), "files": "mlp.csv, attention.csv",
                "layout": vidur.LAYOUT}
    doc = measured_doc(args.model, args.gpu, tables, database, lm_tp=args.tp,
                       created=dt.date.today().isoformat(), efficiency=fitted_efficiency(args.gpu))
    save_profile_doc(doc, args.out)
    print(f"wrote measured profile {args.model} on {args.gpu} ({tables.source}, tp={args.tp}) to {args.out}")
    return 0


def run_fit_roofline(args: argparse.Namespace) -> int:
    _check_source(args.source)
    if args.source != "aiconfigurator":
        raise ValueError("fit-roofline reads --from aiconfigurator only")
    if args.out is not None:
        check_file(args.out)
    system = args.system or {v: k for k, v in aiconfigurator.GPU_OF_SYSTEM.items()}.get(args.gpu)
    if system is None:
        raise ValueError(f"the database has no system for GPU {args.gpu!r}: give --system (held: "
                         f"{', '.join(aiconfigurator.systems(aiconfigurator.check_db(args.db)))})")
    db = aiconfigurator.check_db(args.db)
    version = aiconfigurator.resolve(db, system, args.engine, args.engine_version)
    tables = aiconfigurator.load_tables(system, args.engine, version, db)
    result = fit_roofline(args.gpu, tables)
    print(f"roofline of {args.gpu} fitted to {tables.source}")
    for line in result.report_lines():
        print(line)
    if args.out is not None:
        doc = fitted_constants_doc(args.gpu, result, tables.source)
        doc["provenance"].update(package=aiconfigurator.PINNED, created=dt.date.today().isoformat())
        write_fitted(doc, args.out)
        print(f"wrote the fitted constants to {args.out}")
    return 0
