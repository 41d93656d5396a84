"""What an encoder call costs beyond its kernels, measured on this CPU: the pieces of the 1.32 s.

The evaluation charges every encoder call ``encode_call_overhead_s`` = 1.32 s
beyond the roofline kernels, the one constant taken from the paper's 0.75
req/s (easerve.experiments.anchor.paper_anchored_efficiency). This bench times
what a serving engine does on the host for one request before its encoder
kernels run, with the real ``transformers`` processors (built in code, no
hub) on inputs of the paper's sizes:

* decoding the request's encoded media (a JPEG of each image, each frame);
* the model's processor: LLaVA-NeXT's anyres image processor, Qwen2.5-VL's
  image processor (on an image, and on 16 frames of 720p: vLLM random-mm's
  bucket; its video processor needs torchvision, which the pinned torch here
  cannot have, and resizes and patches the frames the same way),
  and the Whisper feature extractor Qwen2-Audio and Ultravox use (5-30 s);
* the live executor's own per-call overhead: an encode call of the tiny
  model on the smallest input, where the kernels take almost nothing.

It prints, per piece, the median over ``--reps`` and the fraction of 1.32 s
it explains, and ends with what the measured host parts of LLaVA-34B's typical
image (640x480, the ``llava-image`` mix's median item) explain of the per-call
constant and the residual they leave (``encode_call_parts``). CPU figures (PIL
backends: torchvision is not installable beside the pinned torch here); a GPU
server does the same host work on its CPU.

``--json PATH`` writes the pieces the simulator uses in the format of
``calibration/specs/host/preprocess.json`` (the committed table came from it;
calibration.host_preprocess reads it).

Run: ``.venv/bin/python bench/encoder_call_cost.py [--reps N] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import datetime
import io
import os
import platform
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from calibration.host_preprocess import (  # noqa: E402
    HostPreprocessEntry,
    HostPreprocessTable,
    write_table,
)
from easerve.experiments.anchor import encode_call_parts  # noqa: E402

#: the per-call cost the evaluation charges (paper-anchored), seconds
ANCHOR_S = 1.32


def _median_s(fn: Callable[[], object], reps: int) -> float:
    fn()  # warm
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _image(rng: np.random.Generator, h: int, w: int) -> object:
    from PIL import Image

    return Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))


def _jpeg(img: object) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=90)  # type: ignore[attr-defined]
    return buf.getvalue()


def _decode(data: bytes) -> object:
    from PIL import Image

    img = Image.open(io.BytesIO(data))
    img.load()
    return img


def pieces(reps: int) -> list[tuple[str, float]]:
    from transformers import LlavaNextImageProcessor, Qwen2VLImageProcessor, WhisperFeatureExtractor

    rng = np.random.default_rng(0)
    out = []
    llava, qwen_image = LlavaNextImageProcessor(), Qwen2VLImageProcessor()
    for h, w in ((480, 640), (672, 672), (1024, 1024), (1080, 1920)):
        img = _image(rng, h, w)
        data = _jpeg(img)
        out.append((f"JPEG decode {w}x{h}", _median_s(lambda d=data: _decode(d), reps)))
        out.append((f"LLaVA-NeXT image processor {w}x{h}", _median_s(lambda i=img: llava(i), reps)))
    img = _image(rng, 1024, 1024)
    out.append(("Qwen2.5-VL image processor 1024x1024", _median_s(lambda: qwen_image(img), reps)))
    frames = [_image(rng, 720, 1280) for _ in range(16)]
    data = [_jpeg(f) for f in frames]
    out.append(("JPEG decode 16 frames 1280x720", _median_s(lambda: [_decode(d) for d in data], reps)))
    # the video processor needs torchvision (not installable beside the pinned torch): the image
    # processor on the 16 frames does the same resize to 560x1008 and patching, frame by frame
    out.append(("Qwen2.5-VL processor, 16 frames 1280x720", _median_s(lambda: qwen_image(frames), reps)))
    whisper = WhisperFeatureExtractor()
    for seconds in (5, 10, 15, 30):
        wave = rng.standard_normal(16_000 * seconds).astype(np.float32)
        out.append((f"Whisper features {seconds} s audio",
                    _median_s(lambda x=wave: whisper(x, sampling_rate=16_000), reps)))
    out.append(("live encode call, tiny model, smallest input", _live_call_s(reps)))
    return out


def _live_call_s(reps: int) -> float:
    import torch

    from easerve_core.request import Modality
    from live.stages import encode_batch
    from live.zoo import ModelSpec, build_model

    spec = ModelSpec(name="qwen2-audio", size="tiny")
    model = build_model(spec)
    mm = spec.family.make_input(model.config, Modality.AUDIO, [4], np.random.default_rng(0))
    torch.set_num_threads(1)
    with torch.no_grad():
        return _median_s(lambda: encode_batch(model, spec.family, [mm]), reps)


#: (model, modality, item in words, its LM tokens, size rule, decode piece, processor piece):
#: the mixes' typical items (docs/workloads.md), the pieces the simulator charges
TABLE_ROWS = (
    ("llava-v1.6-34b", "image", "640x480 JPEG (llava-image's median item, 2,340 tokens)", 2340, "item",
     "JPEG decode 640x480", "LLaVA-NeXT image processor 640x480"),
    ("qwen2.5-vl-32b", "video", "16 frames of 1280x720, JPEG each (qwen-video-rmm16, 5,760 tokens)", 5760,
     "tokens", "JPEG decode 16 frames 1280x720", "Qwen2.5-VL processor, 16 frames 1280x720"),
    ("qwen2.5-vl-32b", "image", "1024x1024 JPEG (qwen-image's median item, 1,369 tokens)", 1369, "item",
     "JPEG decode 1024x1024", "Qwen2.5-VL image processor 1024x1024"),
    ("ultravox-v0.6-gemma3-27b", "audio", "15 s of 16 kHz PCM (ultravox-audio's median clip, 94 tokens; "
     "no decode: raw samples)", 94, "item", None, "Whisper features 15 s audio"),
)


def table_of(rows: list[tuple[str, float]], reps: int) -> HostPreprocessTable:
    """The measured pieces as a host preprocessing table (calibration/specs/host/preprocess.json)."""
    seconds = dict(rows)
    entries = tuple(
        HostPreprocessEntry(model=model, modality=modality, item=item, ref_tokens=tokens,
                            decode_s=round(seconds[dec], 6) if dec else 0.0,
                            processor_s=round(seconds[proc], 6), scales_with=scale)
        for model, modality, item, tokens, scale, dec, proc in TABLE_ROWS)
    cpu = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores visible; {_cpu_name()}"
    return HostPreprocessTable(
        source=f"bench/encoder_call_cost.py --reps {reps} (medians; transformers processors with PIL "
               "backends, built in code)",
        measured=datetime.date.today().isoformat(), cpu=cpu, entries=entries)


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "CPU model unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--json", type=Path, default=None, help="write the measured table here")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    rows = pieces(args.reps)
    width = max(len(name) for name, _ in rows)
    for name, seconds in rows:
        print(f"{name:<{width}}  {seconds * 1e3:9.2f} ms  {seconds / ANCHOR_S:7.2%} of {ANCHOR_S} s")
    table = table_of(rows, args.reps)
    if args.json is not None:
        print(f"wrote {write_table(table, args.json)}")
    parts = encode_call_parts(host_table=table)
    image = parts["image"]
    for modality in ("video", "audio"):
        p = parts[modality]
        print(f"{modality}: measured host part {p.host_s:.3f} s per typical request "
              f"({p.explained_frac:.0%} of {image.anchor_overhead_s:.2f} s), kernels {p.kernel_s:.3f} s")
    print(f"measured host parts explain {image.explained_frac:.1%} of {image.anchor_overhead_s:.2f} s "
          f"for LLaVA-34B image; residual {image.residual_s:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
