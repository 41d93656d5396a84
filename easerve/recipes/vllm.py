"""The recipe for vLLM v0.32.0: encoder-only instances, Prefill and Decode instances, and a proxy.

s = 1 is vLLM's disaggregated encoder (EPD): encoder-only instances hand
their embeddings to the Prefill instances through the EC connector
(``--ec-transfer-config``, ``ECExampleConnector`` on a shared disk path),
Prefill hands the KV cache to Decode through ``NixlConnector``
(``--kv-transfer-config``), and the example proxy ``disagg_epd_proxy.py``
fans each request's items out to the encoders, then runs prefill, then decode.

s < 1 has no vLLM switch. The encode GPUs run full instances (encoder and
LM, TP as the encode workers) that prefill what they encode, as KV
producers; the Prefill workers (s > 0) run full instances too; and the P/D
proxy ``toy_proxy_server.py`` round-robins over a prefiller list weighted so
that the Prefill workers take s of the requests. Sources: docs/recipes.md.
"""

from __future__ import annotations

import json

from easerve.recipes.common import PROXY_PORT, Instance, Recipe, Topology, command, launch_script, split_cycle
from easerve.recipes.readme import Knob, common_missing, knob_values, recipe_markdown

VERSION = "vLLM v0.32.0"
SOURCES = (
    "release: https://github.com/vllm-project/vllm/releases/tag/v0.32.0; the disaggregated-encoder "
    "example as rendered at https://docs.vllm.ai/en/v0.32.0/examples/disaggregated/disaggregated_encoder/",
    "flags and connector configs: examples/disaggregated/disaggregated_encoder/README.md (commit f6ce20fd) "
    "and disagg_1e1p1d_example.sh (commit 030ea52e), vllm-project/vllm",
    "proxies: examples/disaggregated/disaggregated_encoder/disagg_epd_proxy.py (commit da94e34c) and "
    "tests/v1/kv_connector/nixl_integration/toy_proxy_server.py (commit 030ea52e)",
)
#: the EC connector's shared disk path (one path every instance reads; a shared file system across nodes)
EC_PATH = "/tmp/easerve_ec_cache"
#: the encoder instance's step token budget: "a very high value" (README); the 1e1p1d example's value
ENCODER_TOKEN_BUDGET = 114688
#: the encoder instance reserves almost no KV cache (the 1e1p1d example's value)
ENCODER_GPU_MEMORY_UTILIZATION = 0.01
#: first NIXL side-channel port; each KV instance takes as many ports as its TP (vLLM's accuracy test)
NIXL_SIDE_CHANNEL_BASE = 5600


def _json(data: dict[str, object]) -> str:
    return json.dumps(data, separators=(",", ":"), sort_keys=False)


def _ec(role: str) -> str:
    return _json({"ec_connector": "ECExampleConnector", "ec_role": role,
                  "ec_connector_extra_config": {"shared_storage_path": EC_PATH}})


def _kv(role: str) -> str:
    return _json({"kv_connector": "NixlConnector", "kv_role": role})


def _serve(topo: Topology, inst: Instance, extra: list[str], side_port: int | None) -> str:
    env = {"CUDA_VISIBLE_DEVICES": inst.visible_devices}
    if side_port is not None:
        env["VLLM_NIXL_SIDE_CHANNEL_PORT"] = str(side_port)
    argv = ["vllm", "serve", topo.model, "--port", str(inst.port),
            "--tensor-parallel-size", str(inst.tp), *extra]
    return command(argv, env=env)


def _instance_args(topo: Topology, inst: Instance) -> list[str]:
    d = topo.deployment
    if inst.role == "encode":
        return ["--enforce-eager", "--no-enable-prefix-caching", "--mm-encoder-only",
                "--gpu-memory-utilization", str(ENCODER_GPU_MEMORY_UTILIZATION),
                "--max-num-batched-tokens", str(ENCODER_TOKEN_BUDGET),
                "--max-num-seqs", str(d.max_encode_batch), "--ec-transfer-config", _ec("ec_producer")]
    if inst.role == "prefill" and topo.all_remote:
        return ["--ec-transfer-config", _ec("ec_consumer"), "--kv-transfer-config", _kv("kv_producer")]
    if inst.role in ("prefill", "local-prefill"):
        return ["--kv-transfer-config", _kv("kv_producer")]
    return ["--max-num-seqs", str(d.max_num_decode_seqs), "--kv-transfer-config", _kv("kv_consumer")]


def _blocks(topo: Topology) -> list[tuple[int, str, str]]:
    blocks, side = [], NIXL_SIDE_CHANNEL_BASE
    for inst in topo.instances:
        uses_kv = inst.role != "encode"
        text = _serve(topo, inst, _instance_args(topo, inst), side if uses_kv else None)
        if uses_kv:
            side += inst.tp
        blocks.append((inst.node, f"{inst.name} on GPUs {inst.visible_devices} of node {inst.node}", text))
    return blocks


def _proxy(topo: Topology) -> str:
    if topo.all_remote:
        urls = {role: ",".join(i.url for i in group)
                for role, group in (("encode", topo.encode), ("prefill", topo.prefill),
                                    ("decode", topo.decode))}
        return command(["python", "disagg_epd_proxy.py", "--host", "0.0.0.0", "--port", str(PROXY_PORT),
                        "--encode-servers-urls", urls["encode"], "--prefill-servers-urls", urls["prefill"],
                        "--decode-servers-urls", urls["decode"]], background=False)
    cycle = split_cycle(topo.encode, topo.prefill, topo.remote_fraction)
    return command(["python", "toy_proxy_server.py", "--host", "0.0.0.0", "--port", str(PROXY_PORT),
                    "--prefiller-hosts", *(i.host for i in cycle),
                    "--prefiller-ports", *(str(i.port) for i in cycle),
                    "--decoder-hosts", *(i.host for i in topo.decode),
                    "--decoder-ports", *(str(i.port) for i in topo.decode)], background=False)


def _mapping(topo: Topology) -> list[Knob]:
    v, d = knob_values(topo), topo.deployment
    if topo.all_remote:
        encode = "encoder-only instances (`--mm-encoder-only`, EC producer), `--tensor-parallel-size`"
        batch = (f"`--max-num-seqs {d.max_encode_batch}` on the encoder instances: the proxy sends one "
                 "request per item, so at most B items are scheduled in one step (the closest knob)")
        split = "all prefill on the Prefill instances (EPD proxy, E -> P -> D)"
    else:
        encode = "full instances on the encode GPUs (encoder + LM), KV producers: E+P aggregated"
        batch = "none: the encoder runs inside the E+P instance under its step token budget"
        cycle = split_cycle(topo.encode, topo.prefill, d.remote_fraction)
        remote = sum(i.role == "prefill" for i in cycle)
        split = f"weighted round-robin in `toy_proxy_server.py`: {remote} of {len(cycle)} slots remote"
    return [
        Knob(knob="encode workers x TP", value=v["encode"], engine=encode),
        Knob(knob="prefill workers x TP", value=v["prefill"],
             engine="Prefill instances, KV producers (NixlConnector)"
             + (", EC consumers" if topo.all_remote else "; they encode their own items")),
        Knob(knob="decode workers x TP", value=v["decode"], engine="Decode instances, KV consumers"),
        Knob(knob="max encode batch B", value=v["B"], engine=batch),
        Knob(knob="remote-prefill fraction s", value=v["s"], engine=split),
        Knob(knob="max_num_decode_seqs", value=v["decode_seqs"], engine="`--max-num-seqs` on Decode"),
        Knob(knob="rate hint", value=v["rate"],
             engine="none (benchmark with `vllm bench serve --request-rate`)"),
    ]


def build(topo: Topology) -> Recipe:
    """The vLLM recipe for ``topo``."""
    d = topo.deployment
    proxy = "disagg_epd_proxy.py" if topo.all_remote else "toy_proxy_server.py"
    missing = common_missing(
        topo,
        router=("the EPD proxy's round-robin over Prefill and Decode instances" if topo.all_remote else
                "a fixed weighted round-robin list in the P/D proxy: the share is s over every cycle, "
                "not within half a request at every point, and it ignores queue lengths"),
        batcher=(f"at most B = {d.max_encode_batch} requests per encoder step (`--max-num-seqs`), batched "
                 "greedily each step: no gap-based wait, no age cap" if topo.all_remote else
                 "vLLM's per-step encoder budget inside the E+P instance: no B, no wait"))
    notes = list(topo.notes)
    if not topo.all_remote:
        notes.append("s < 1: the Prefill instances encode their own requests' items (no EC connector on "
                     "this path); only the E+P instances keep Encode and Prefill on one GPU group.")
    notes.append(f"`{proxy}` ships as a vLLM example, not in the wheel: copy it from the v0.32.0 tree "
                 "beside launch.sh (docs/recipes.md has the path).")
    if topo.all_remote:
        notes.append(f"The EC connector writes embeddings under {EC_PATH}; across nodes it must be a shared "
                     "file system path (edit it in launch.sh).")
    text = recipe_markdown(
        title="vLLM recipe", version=[VERSION, *SOURCES], topo=topo, mapping=_mapping(topo),
        missing=missing, notes=notes,
        run=[f"`bash launch.sh` starts every instance, then the proxy on port {PROXY_PORT} "
             f"(OpenAI API: `http://<node 0>:{PROXY_PORT}/v1/chat/completions`)."])
    script = launch_script(f"vLLM recipe ({VERSION}): {d.label()}", _blocks(topo), _proxy(topo))
    return Recipe(engine="vllm", engine_version=VERSION, files={"launch.sh": script, "RECIPE.md": text},
                  notes=tuple(notes))
