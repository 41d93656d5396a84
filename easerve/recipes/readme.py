"""RECIPE.md: the engine version, the instances, the knob-by-knob mapping and what has no equivalent."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from easerve.recipes.common import Topology, instance_table, markdown_table


@dataclass(frozen=True, slots=True, kw_only=True)
class Knob:
    """One easerve knob, what it is in the deployment, and what the engine does with it."""

    knob: str
    value: str
    engine: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Missing:
    """An easerve mechanism the engine has no switch for, and what the recipe does instead."""

    what: str
    instead: str


def knob_values(topo: Topology) -> dict[str, str]:
    """The deployment's knobs as the mapping table shows them."""
    d = topo.deployment
    rate = "not given" if topo.rate_hz is None else f"{topo.rate_hz:g} req/s"
    return {
        "encode": f"{d.encode.num_workers} x TP {d.encode.tp}",
        "prefill": f"{d.prefill.num_workers} x TP {d.prefill.tp}",
        "decode": f"{d.decode.num_workers} x TP {d.decode.tp}",
        "B": f"B = {d.max_encode_batch} ({d.batching})",
        "s": f"s = {d.remote_fraction:g}",
        "sm": str(d.sm_sharing),
        "router": d.router,
        "rate": rate,
        "decode_seqs": str(d.max_num_decode_seqs),
    }


def recipe_markdown(*, title: str, version: Sequence[str], topo: Topology, mapping: Sequence[Knob],
                    missing: Sequence[Missing], run: Sequence[str], notes: Sequence[str]) -> str:
    """The RECIPE.md text (deterministic: no dates, no machine paths)."""
    d = topo.deployment
    out = [f"# {title}", "", f"Deployment: `{d.label()}`; model `{topo.model}`.", "", "## Engine version", ""]
    out += [f"- {line}" for line in version]
    out += ["", "## Instances", "",
            "GPU ids are assigned in order (encode workers from GPU 0, then Prefill, then Decode)."
            + (" Each node runs `launch.sh` with its `NODE_RANK`." if topo.num_nodes > 1 else
               " On several nodes, `launch.sh` runs on each with `NODE_RANK=n` and `NODE<n>_HOST` set."),
            ""]
    out += instance_table(topo)
    out += ["", "## Mapping", ""]
    out += markdown_table(["easerve", "this deployment", "engine"],
                          [(m.knob, m.value, m.engine) for m in mapping])
    out += ["", "## No equivalent in the engine", ""]
    out += markdown_table(["easerve", "what the recipe does instead"], [(m.what, m.instead) for m in missing])
    out += ["", "## Run", "", *list(run)]
    if notes:
        out += ["", "## Notes", ""] + [f"- {n}" for n in notes]
    return "\n".join(out) + "\n"


def common_missing(topo: Topology, *, router: str, batcher: str) -> list[Missing]:
    """The three EAServe mechanisms no engine has, worded for this recipe."""
    d = topo.deployment
    sm = ("not used: s = 1, nothing is co-located" if topo.all_remote else
          "local Prefill runs in the same engine instance as Encode on the encode GPUs; the engine's "
          "own scheduler interleaves them (no SM partition, no share table)")
    return [
        Missing(what=f"adaptive encode micro-batcher ({d.batching}, B = {d.max_encode_batch}, "
                     f"gap_factor {d.gap_factor:g}, max_wait_s {d.max_wait_s:g})", instead=batcher),
        Missing(what=f"deficit-counter router (s = {d.remote_fraction:g})", instead=router),
        Missing(what=f"SM sharing between Encode and local Prefill ({d.sm_sharing})", instead=sm),
    ]
