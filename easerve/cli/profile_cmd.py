"""``easerve profile``: make, fit and inspect stage latency profiles.

  easerve profile analytic --model M --gpu G [--tp N] --out FILE
  easerve profile fit SAMPLES --out FILE
  easerve profile show FILE [--prompt-tokens N] [--output-tokens N] [--items T,T]
  easerve profile build --from aiconfigurator --system S --engine E --model M --out FILE
  easerve profile fit-roofline --gpu G --from aiconfigurator [--out FILE]

``analytic`` writes the roofline profile of a model on a GPU (``--tp`` is the
Prefill/Decode tensor parallelism ``show`` reports; the profile answers any
TP). ``fit`` fits a profile to measured samples (docs/profiles.md). ``show``
prints the stage table: latency and capacity (requests/s) of one worker per
stage at the model's typical request, Encode at TP 1 for B = 1 and 8; for a
measured profile, the source of every op. ``build`` and ``fit-roofline``:
:mod:`easerve.cli.profile_measured`.
"""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

from calibration import (
    AnalyticProfile,
    MeasuredProfile,
    analytic_doc,
    fit_samples,
    fitted_doc,
    gpu_names,
    load_samples,
    model_names,
    profile_from_doc,
)
from calibration.specs import gpu_spec, model_spec
from easerve.cli import profile_measured
from easerve.cli.common import add_out, command_parser
from easerve.cli.outputs import check_file
from easerve_core import StageGroup, capacity
from easerve_core.capacity import RequestShape
from easerve_core.profile import ProfileDoc, profile_for_tp
from runtime.profiles import load_profile_doc, save_profile_doc

ENCODE_BATCHES = (1, 8)


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = command_parser(subparsers, "profile", help="make, fit and inspect stage latency profiles",
                       doc=__doc__, func=None)
    sub = p.add_subparsers(dest="profile_command", metavar="ACTION", required=True)
    a = sub.add_parser("analytic", help="write the analytic roofline profile of a model on a GPU")
    a.add_argument("--model", required=True, help=f"one of: {', '.join(model_names())}")
    a.add_argument("--gpu", required=True, help=f"one of: {', '.join(gpu_names())}")
    a.add_argument("--tp", type=int, default=2, help="Prefill/Decode TP to report (default 2)")
    add_out(a, "profile JSON to write")
    a.set_defaults(func=run_analytic)
    f = sub.add_parser("fit", help="fit a profile to measured samples")
    f.add_argument("samples", type=Path, help="samples JSON (format easerve.samples)")
    add_out(f, "profile JSON to write")
    f.set_defaults(func=run_fit)
    s = sub.add_parser("show", help="print a profile's stage table")
    s.add_argument("file", type=Path, help="profile JSON")
    s.add_argument("--prompt-tokens", type=int, default=None, help="override the typical prompt")
    s.add_argument("--output-tokens", type=int, default=None, help="override the typical output")
    s.add_argument("--items", default=None, help="LM tokens per item, comma-separated")
    s.add_argument("--max-num-seqs", type=int, default=256, help="decode batch cap (default 256)")
    s.set_defaults(func=run_show)
    profile_measured.register(sub, check_lm_tp)


def _today() -> str:
    return dt.date.today().isoformat()


def check_lm_tp(model: str, tp: int, flag: str = "--tp") -> int:
    """``tp`` if a deployment could run ``model``'s LM at it: the rule ``easerve sim`` applies to a
    group's ``tp`` (a power of two, at most 64), and the LM's attention heads split evenly."""
    try:
        StageGroup(num_workers=1, tp=tp)
    except ValueError as exc:
        raise ValueError(f"--{exc}" if flag == "--tp" else f"{flag}: {exc}") from None
    heads = model_spec(model).lm.num_heads
    if heads % tp:
        raise ValueError(f"{flag} {tp} does not split {model}'s {heads} attention heads evenly")
    return tp


def run_analytic(args: argparse.Namespace) -> int:
    check_lm_tp(args.model, args.tp)
    doc = analytic_doc(args.model, args.gpu, lm_tp=args.tp, created=_today())
    check_file(args.out)
    save_profile_doc(doc, args.out)
    print(f"wrote analytic profile {args.model} on {args.gpu} (tp={args.tp}) to {args.out}")
    return 0


def run_fit(args: argparse.Namespace) -> int:
    samples = load_samples(args.samples)
    result = fit_samples(samples)
    doc = fitted_doc(result, samples, created=_today())
    check_file(args.out)
    save_profile_doc(doc, args.out)
    errors = ", ".join(f"{k} {v:.1%}" for k, v in result.fit_error.items())
    print(f"wrote fitted profile to {args.out} (fit error: {errors})")
    return 0


def _items(text: str) -> tuple[int, ...]:
    """``--items 2928,1948``: LM tokens per item, each a whole number >= 1."""
    try:
        items = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise ValueError(f"--items must be comma-separated whole numbers, got {text!r}") from None
    if not items or min(items) < 1:
        raise ValueError(f"--items must hold token counts >= 1, got {text!r}")
    return items


def _shape(doc: ProfileDoc, args: argparse.Namespace) -> RequestShape:
    try:
        typical = model_spec(doc.model).typical_request
        base = (typical.prompt_tokens, typical.output_tokens, typical.mm_tokens_per_item,
                typical.encode_tokens_per_item)
    except ValueError:
        if args.prompt_tokens is None or args.output_tokens is None:
            raise ValueError(f"model {doc.model!r} has no spec: give --prompt-tokens and "
                             "--output-tokens (and --items)") from None
        base = (0, 1, (), ())
    given = args.items is not None  # --items are LM tokens, and the encoder's too
    return RequestShape(
        prompt_tokens=base[0] if args.prompt_tokens is None else args.prompt_tokens,
        output_tokens=base[1] if args.output_tokens is None else args.output_tokens,
        mm_tokens_per_item=_items(args.items) if given else base[2],
        encode_tokens_per_item=() if given else base[3])


def _kv_capacity(doc: ProfileDoc, profile: object, lm_tp: int) -> int | None:
    if isinstance(profile, AnalyticProfile | MeasuredProfile):
        return profile.kv_capacity_tokens(lm_tp)
    try:  # a fitted profile: borrow the memory model of its specs, when known
        return AnalyticProfile(model=model_spec(doc.model), gpu=gpu_spec(doc.gpu)).kv_capacity_tokens(lm_tp)
    except ValueError:
        return None


def show_lines(doc: ProfileDoc, shape: RequestShape, *, max_num_seqs: int = 256) -> list[str]:
    """The text ``easerve profile show`` prints (separate for tests and notebooks)."""
    profile = profile_from_doc(doc)
    lm_tp = int(doc.params.get("lm_tp", 1))
    enc, lm = profile_for_tp(profile, 1), profile_for_tp(profile, lm_tp)
    kv = _kv_capacity(doc, profile, lm_tp)
    decode_batch = capacity.max_decode_batch(shape, kv, max_num_seqs=max_num_seqs)
    lines = [f"profile  {doc.model} on {doc.gpu}  kind={doc.kind}  created={doc.created}",
             f"source   {doc.source}"]
    if doc.fit_error:
        lines.append("fit err  " + ", ".join(f"{k} {v:.1%}" for k, v in doc.fit_error.items()))
    tower = shape.encode_tokens_per_item
    pooled = f" (encoder: {list(tower)} before pooling)" if tower else ""
    lines.append(f"request  prompt={shape.prompt_tokens} items={list(shape.mm_tokens_per_item)}{pooled} "
                 f"output={shape.output_tokens} (seq {shape.seq_len} tokens)")
    lines.append(f"{'stage':<10}{'worker':<8}{'batch':>6}{'latency_ms':>12}{'capacity_rps':>14}")
    for b in ENCODE_BATCHES:
        if not shape.mm_tokens_per_item:
            break
        lat = enc.encode_s(list(shape.encode_items) * b)
        lines.append(f"{'encode':<10}{'TP1':<8}{b:>6}{lat * 1e3:>12.1f}{b / lat:>14.2f}")
    lat = lm.prefill_s([shape.seq_len])
    lines.append(f"{'prefill':<10}{f'TP{lm_tp}':<8}{1:>6}{lat * 1e3:>12.1f}{1 / lat:>14.2f}")
    rps = capacity.decode_rps(lm, shape, batch_size=decode_batch)
    step = lm.decode_step_s(decode_batch, decode_batch * shape.mean_decode_context) if decode_batch else 0
    lines.append(f"{'decode':<10}{f'TP{lm_tp}':<8}{decode_batch:>6}{step * 1e3:>12.1f}{rps:>14.2f}"
                 "   (latency = one step)")
    if kv is not None:
        lines.append(f"memory   KV capacity at TP{lm_tp}: {kv} tokens "
                     f"({kv // shape.tokens_per_seq} sequences of {shape.tokens_per_seq})")
    if isinstance(profile, AnalyticProfile):
        fits = {tp: profile.lm_fits(tp) for tp in (1, 2, 4, 8)}
        fit_text = ", ".join(f"{k}={'yes' if v else 'no'}" for k, v in fits.items())
        lines.append(f"memory   LM fits at TP: {fit_text}; encode TP1 with local prefill holds "
                     f"{profile.kv_capacity_tokens(1, with_encoder=True)} KV tokens")
    if doc.sm_share_table is not None:
        lines.append("SM share " + ", ".join(f"B={k}: {v:.1f}" for k, v in doc.sm_share_table.shares.items()))
    if isinstance(profile, MeasuredProfile):
        lines.append(f"ops      source per op (encode TP1, prefill and decode TP{lm_tp}):")
        lines += [f"  {label:<22}{kind:<22}{source}" for label, kind, source in profile.op_sources(lm_tp)]
    return lines


def run_show(args: argparse.Namespace) -> int:
    doc = load_profile_doc(args.file)
    print("\n".join(show_lines(doc, _shape(doc, args), max_num_seqs=args.max_num_seqs)))
    return 0
