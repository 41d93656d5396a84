"""The recipe for NVIDIA Dynamo (vLLM backend): a DynamoGraphDeployment and the same graph as local processes.

s = 1 is Dynamo's E/P/D pattern: ``--multimodal-encode-worker`` workers,
Prefill workers that route items to them (``--route-to-encoder
--disaggregation-mode prefill``) and ``--multimodal-decode-worker``
workers, behind ``dynamo.frontend``. s < 1 is its EP/D pattern: Prefill
workers that encode their own items (no ``--route-to-encoder``) on the
encode GPUs and, for s > 0, on the Prefill workers' GPUs, with Decode
workers (``--disaggregation-mode decode``); Dynamo's router picks among
prefill workers itself. ``dgd.yaml`` is the Kubernetes form (replicas = worker
count, ``resources.limits.gpu`` = TP); ``launch.sh`` runs the same workers on
one machine. Sources: docs/recipes.md.
"""

from __future__ import annotations

import json

from easerve.recipes.common import PROXY_PORT, Instance, Recipe, Topology, command, launch_script
from easerve.recipes.readme import Knob, common_missing, knob_values, recipe_markdown

VERSION = (
    "Dynamo main at commit ecd29799 (vLLM backend); DynamoGraphDeployment apiVersion nvidia.com/v1alpha1"
)
SOURCES = (
    "E/P/D worker flags: examples/backends/vllm/launch/disagg_multimodal_epd.sh (commit ecd29799), "
    "ai-dynamo/dynamo",
    "EP/D worker flags and the KV connector: examples/backends/vllm/launch/disagg_multimodal_p_d.sh "
    "(commit 296b1788)",
    "DGD fields (services, componentType, subComponentType, replicas, resources.limits.gpu, "
    "extraPodSpec.mainContainer): the Dynamo rolling-update guide's v1alpha1 examples",
    "the image is `${RUNTIME_IMAGE}` (set it with envsubst, as Dynamo's own docs do): a vllm-runtime "
    "image whose `dynamo.vllm` has `--route-to-encoder`",
)
#: first NIXL side-channel port for local processes; each worker takes as many as its TP
NIXL_SIDE_CHANNEL_BASE = 20097
#: first Dynamo system (health/metrics) port for local processes
SYSTEM_PORT_BASE = 8081
KV_BOTH = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"}, separators=(",", ":"))


def _worker_args(topo: Topology, role: str, tp: int) -> list[str]:
    base = ["--model", topo.model, "--tensor-parallel-size", str(tp)]
    if topo.all_remote:
        return base + {
            "encode": ["--multimodal-encode-worker", "--enable-multimodal"],
            "prefill": ["--route-to-encoder", "--disaggregation-mode", "prefill", "--enable-multimodal",
                        "--enable-mm-embeds"],
            "decode": ["--multimodal-decode-worker", "--enable-multimodal", "--enable-mm-embeds"],
        }[role]
    if role == "decode":
        return [*base, "--disaggregation-mode", "decode", "--enable-multimodal", "--enable-mm-embeds",
                "--kv-transfer-config", KV_BOTH]
    return [*base, "--disaggregation-mode", "prefill", "--enable-multimodal", "--kv-transfer-config", KV_BOTH]


def _services(topo: Topology) -> list[tuple[str, str, tuple[Instance, ...]]]:
    """(service name, subComponentType or '', instances) for every worker service."""
    first = ("EncodeWorker", "") if topo.all_remote else ("LocalPrefillWorker", "prefill")
    out = [(first[0], first[1], topo.encode), ("PrefillWorker", "prefill", topo.prefill),
           ("DecodeWorker", "decode", topo.decode)]
    return [s for s in out if s[2]]


def _role(inst: Instance) -> str:
    return "prefill" if inst.role == "local-prefill" else inst.role


def _yaml_list(items: list[str], indent: int) -> list[str]:
    return [" " * indent + "- " + json.dumps(x) for x in items]


def dgd_yaml(topo: Topology) -> str:
    """The DynamoGraphDeployment (v1alpha1) text."""
    name = "easerve-" + ("epd" if topo.all_remote else "ep-d")
    out = ["apiVersion: nvidia.com/v1alpha1", "kind: DynamoGraphDeployment", "metadata:", f"  name: {name}",
           "spec:", "  services:", "    Frontend:", "      componentType: frontend", "      replicas: 1",
           "      extraPodSpec:", "        mainContainer:", "          image: ${RUNTIME_IMAGE}"]
    for service, sub, group in _services(topo):
        tp = group[0].tp
        out += [f"    {service}:", "      componentType: worker"]
        out += [f"      subComponentType: {sub}"] if sub else []
        out += [f"      replicas: {len(group)}", "      resources:", "        limits:",
                f'          gpu: "{tp}"',
                "      extraPodSpec:", "        mainContainer:", "          image: ${RUNTIME_IMAGE}",
                "          command:"]
        out += _yaml_list(["python3", "-m", "dynamo.vllm"], 10)
        out += ["          args:", *_yaml_list(_worker_args(topo, _role(group[0]), tp), 10)]
    return "\n".join(out) + "\n"


def _blocks(topo: Topology) -> list[tuple[int, str, str]]:
    blocks, side = [], NIXL_SIDE_CHANNEL_BASE
    for k, inst in enumerate(topo.instances):
        env = {"CUDA_VISIBLE_DEVICES": inst.visible_devices, "VLLM_NIXL_SIDE_CHANNEL_PORT": str(side),
               "DYN_SYSTEM_PORT": str(SYSTEM_PORT_BASE + k)}
        side += inst.tp
        text = command(["python", "-m", "dynamo.vllm", *_worker_args(topo, _role(inst), inst.tp)], env=env)
        blocks.append((inst.node, f"{inst.name} on GPUs {inst.visible_devices} of node {inst.node}", text))
    return blocks


def _mapping(topo: Topology) -> list[Knob]:
    v = knob_values(topo)
    encode = ("`EncodeWorker`: `--multimodal-encode-worker`, replicas x `--tensor-parallel-size`"
              if topo.all_remote else "`LocalPrefillWorker`: Prefill workers that encode their own items "
                                      "(EP/D), on the encode GPUs")
    split = ("all prefill on `PrefillWorker` (`--route-to-encoder`)" if topo.all_remote else
             "not enforced: Dynamo's router picks among `LocalPrefillWorker` and `PrefillWorker`")
    return [
        Knob(knob="encode workers x TP", value=v["encode"], engine=encode),
        Knob(knob="prefill workers x TP", value=v["prefill"],
             engine="`PrefillWorker`: replicas x `--tensor-parallel-size`, `subComponentType: prefill`"),
        Knob(knob="decode workers x TP", value=v["decode"],
             engine="`DecodeWorker`: replicas x `--tensor-parallel-size`, `subComponentType: decode`"),
        Knob(knob="max encode batch B", value=v["B"],
             engine="none: the encode worker handles one request at a time"),
        Knob(knob="remote-prefill fraction s", value=v["s"], engine=split),
        Knob(knob="max_num_decode_seqs", value=v["decode_seqs"], engine="not set (vLLM's default)"),
        Knob(knob="rate hint", value=v["rate"], engine="none (Dynamo's planner scales P/D, not E)"),
    ]


def build(topo: Topology) -> Recipe:
    """The Dynamo recipe for ``topo``."""
    missing = common_missing(
        topo,
        router="Dynamo's own prefill/decode worker selection" + ("" if topo.all_remote else
                                                                  "; the share is not held at s"),
        batcher="none: each encode request runs its own forward (no cross-request batch)")
    notes = list(topo.notes)
    notes.append("In `dgd.yaml` Kubernetes places the pods; GPU ids and nodes in the instance table "
                 "hold for `launch.sh` only.")
    if not topo.all_remote:
        notes.append("s < 1: the remote Prefill workers encode their own requests' items (EP/D pattern).")
    text = recipe_markdown(
        title="Dynamo recipe", version=[VERSION, *SOURCES], topo=topo, mapping=_mapping(topo),
        missing=missing, notes=notes,
        run=["Kubernetes: `RUNTIME_IMAGE=... envsubst < dgd.yaml | kubectl apply -n $NAMESPACE -f -`.",
             f"One machine: `bash launch.sh` starts the workers, then `dynamo.frontend` on port "
             f"{PROXY_PORT}."])
    frontend = command(["python", "-m", "dynamo.frontend", "--http-port", str(PROXY_PORT)], background=False)
    script = launch_script(f"Dynamo recipe ({VERSION}): {topo.deployment.label()}", _blocks(topo), frontend)
    return Recipe(engine="dynamo", engine_version=VERSION,
                  files={"launch.sh": script, "dgd.yaml": dgd_yaml(topo), "RECIPE.md": text},
                  notes=tuple(notes))
