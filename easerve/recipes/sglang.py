"""The recipe for SGLang's EPD disaggregation: encoder-only servers, Prefill and Decode servers, the router.

s = 1: encoder-only servers (``--encoder-only``), language-only Prefill
servers (``--language-only --encoder-urls ... --disaggregation-mode
prefill``) that fetch embeddings over ``zmq_to_scheduler``, Decode servers
(``--disaggregation-mode decode``) and ``sglang_router`` in PD mode in front.
B is the encoder server's ``SGLANG_ENCODER_MAX_BATCH_SIZE``.

s < 1 has no SGLang switch: the encode GPUs run full Prefill servers
(encoder and LM), the Prefill workers (s > 0) run full Prefill servers too,
and the router balances over all of them by its own policy. Sources:
docs/recipes.md.
"""

from __future__ import annotations

from easerve.recipes.common import PROXY_PORT, Instance, Recipe, Topology, command, launch_script
from easerve.recipes.readme import Knob, common_missing, knob_values, recipe_markdown

VERSION = "SGLang main at commit 260d2e2e (after EPD PR #12263, merged 2025-12)"
SOURCES = (
    "launch flags: docs/advanced_features/epd_disaggregation.md (commit 260d2e2e), sgl-project/sglang",
    "Prefill/Decode flags (`--disaggregation-bootstrap-port`, `--tp`): test/.../test_epd_disaggregation.py "
    "and python/sglang/test/server_fixtures/disaggregation_fixture.py (commit 029c6340)",
    "`SGLANG_ENCODER_MAX_BATCH_SIZE = EnvInt(8)`: python/sglang/srt/environ.py",
    "the first tagged release carrying all of these was not pinned here: check `--encoder-only` in "
    "`python -m sglang.launch_server --help` of the version you install",
)
#: the encoder-to-Prefill transport (the documented default)
ENCODER_TRANSFER = "zmq_to_scheduler"
#: first Prefill bootstrap port (SGLang's default is 8998); Prefill instance i takes base + i
BOOTSTRAP_BASE = 8998


def _server(topo: Topology, inst: Instance, extra: list[str], env: dict[str, str]) -> str:
    argv = ["python", "-m", "sglang.launch_server", "--model-path", topo.model, "--host", "0.0.0.0",
            "--port", str(inst.port), "--tp", str(inst.tp), *extra]
    return command(argv, env={"CUDA_VISIBLE_DEVICES": inst.visible_devices, **env})


def _prefills(topo: Topology) -> tuple[Instance, ...]:
    """Every server the router sends prefills to: E+P servers (s < 1) and Prefill servers."""
    return (() if topo.all_remote else topo.encode) + topo.prefill


def _bootstrap(topo: Topology, inst: Instance) -> int:
    return BOOTSTRAP_BASE + _prefills(topo).index(inst)


def _args(topo: Topology, inst: Instance) -> tuple[list[str], dict[str, str]]:
    d = topo.deployment
    if inst.role == "encode":
        return (["--encoder-only", "--encoder-transfer-backend", ENCODER_TRANSFER],
                {"SGLANG_ENCODER_MAX_BATCH_SIZE": str(d.max_encode_batch)})
    if inst.role == "decode":
        return ["--disaggregation-mode", "decode"], {}
    prefill = ["--disaggregation-mode", "prefill", "--disaggregation-bootstrap-port",
               str(_bootstrap(topo, inst))]
    if topo.all_remote:
        prefill += ["--language-only", "--encoder-urls", *(e.url for e in topo.encode),
                    "--encoder-transfer-backend", ENCODER_TRANSFER]
    return prefill, {}


def _blocks(topo: Topology) -> list[tuple[int, str, str]]:
    blocks = []
    for inst in topo.instances:
        extra, env = _args(topo, inst)
        blocks.append((inst.node, f"{inst.name} on GPUs {inst.visible_devices} of node {inst.node}",
                       _server(topo, inst, extra, env)))
    return blocks


def _router(topo: Topology) -> str:
    argv = ["python", "-m", "sglang_router.launch_router", "--pd-disaggregation"]
    for inst in _prefills(topo):
        argv += ["--prefill", inst.url, str(_bootstrap(topo, inst))]
    for inst in topo.decode:
        argv += ["--decode", inst.url]
    argv += ["--host", "0.0.0.0", "--port", str(PROXY_PORT)]
    return command(argv, background=False)


def _mapping(topo: Topology) -> list[Knob]:
    v, d = knob_values(topo), topo.deployment
    if topo.all_remote:
        encode = "encoder-only servers (`--encoder-only`), `--tp`"
        batch = f"`SGLANG_ENCODER_MAX_BATCH_SIZE={d.max_encode_batch}` on the encoder servers (default 8)"
        split = "all prefill on the language-only Prefill servers"
    else:
        encode = "full Prefill servers on the encode GPUs (encoder + LM): E+P aggregated"
        batch = "none: the encoder runs inside the E+P server's own batching"
        split = "not enforced: the router balances prefills over E+P and Prefill servers by its own policy"
    return [
        Knob(knob="encode workers x TP", value=v["encode"], engine=encode),
        Knob(knob="prefill workers x TP", value=v["prefill"],
             engine="`--disaggregation-mode prefill`" + (" `--language-only --encoder-urls ...`"
                                                          if topo.all_remote else " (full model)")),
        Knob(knob="decode workers x TP", value=v["decode"], engine="`--disaggregation-mode decode`, `--tp`"),
        Knob(knob="max encode batch B", value=v["B"], engine=batch),
        Knob(knob="remote-prefill fraction s", value=v["s"], engine=split),
        Knob(knob="max_num_decode_seqs", value=v["decode_seqs"], engine="not set (the server's default)"),
        Knob(knob="rate hint", value=v["rate"], engine="none"),
    ]


def build(topo: Topology) -> Recipe:
    """The SGLang recipe for ``topo``."""
    d = topo.deployment
    missing = common_missing(
        topo,
        router=("the router's PD policy over Prefill and Decode servers" if topo.all_remote else
                "the router's own policy over every prefill server: the share is not held at s"),
        batcher=(f"the encoder server's greedy loop: up to B = {d.max_encode_batch} queued items per "
                 "forward, no wait for more" if topo.all_remote else
                 "the E+P server's own scheduler: no B, no wait"))
    notes = list(topo.notes)
    if not topo.all_remote:
        notes.append("s < 1: the Prefill servers encode their own requests' items; only the E+P servers "
                     "keep Encode and Prefill on one GPU group.")
    notes.append("The KV transfer backend is SGLang's default (`--disaggregation-transfer-backend`); "
                 "set it and `--disaggregation-ib-device` for your network.")
    text = recipe_markdown(
        title="SGLang recipe", version=[VERSION, *SOURCES], topo=topo, mapping=_mapping(topo),
        missing=missing, notes=notes,
        run=[f"`bash launch.sh` starts every server, then `sglang_router` on port {PROXY_PORT}."])
    script = launch_script(f"SGLang recipe ({VERSION}): {d.label()}", _blocks(topo), _router(topo))
    return Recipe(engine="sglang", engine_version=VERSION, files={"launch.sh": script, "RECIPE.md": text},
                  notes=tuple(notes))
