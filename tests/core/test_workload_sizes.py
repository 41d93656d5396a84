"""Raw item sizes in a [workload] table (easerve_core.workload.sizes): parsed, validated, resolved.

The core only parses them; the LM tokens come from the model's processor
rule (tests/calibration/test_sizes.py). Until then the workload draws nothing.
"""

from __future__ import annotations

import numpy as np
import pytest

from easerve_core.request import Modality
from easerve_core.workload import AudioClip, ImageSize, VideoClip, WorkloadSpec, generate


def _spec(**table: object) -> WorkloadSpec:
    return WorkloadSpec.from_dict({"rate_hz": 1.0, "num_requests": 5, **table})


def test_raw_sizes_parse_by_key() -> None:
    spec = _spec(images=[[1024, 768], [640, 480]], image_weights=[3, 1])
    assert spec.sizes is not None and spec.sizes.key == "images"
    assert spec.sizes.items == (ImageSize(1024, 768), ImageSize(640, 480))
    assert spec.sizes.weights == (3.0, 1.0) and spec.mix_name == "llava-image"
    video = _spec(videos=[{"size": [1280, 720], "frames": 16}, {"size": [640, 360], "seconds": 5, "fps": 2}])
    assert video.sizes is not None and video.mix.modality is Modality.VIDEO and video.mix_name == "qwen-video"
    assert video.sizes.items == (VideoClip(1280, 720, frames=16), VideoClip(640, 360, seconds=5.0, fps=2.0))
    audio = _spec(audio_s=[5, 10.5], mix="ultravox-audio")
    assert audio.sizes is not None and audio.sizes.items == (AudioClip(5.0), AudioClip(10.5))


def test_without_raw_sizes_nothing_changes() -> None:
    plain = _spec(mix="qwen-image")
    assert plain.sizes is None and not plain.needs_size_tokens


def test_unresolved_sizes_draw_nothing_then_resolved_tokens_are_the_mix() -> None:
    spec = _spec(images=[[1024, 768], [640, 480]], image_weights=[1, 0])
    with pytest.raises(ValueError, match=r"workload\.images: raw sizes need the model's processor rule"):
        generate(spec, np.random.default_rng(0))
    done = spec.with_size_tokens((1012, 391), "a rule")
    assert not done.needs_size_tokens
    assert done.mix.item_tokens == (1012, 391) and done.mix.item_weights == (1.0, 0.0)
    assert {r.mm_tokens_per_item for r in generate(done, np.random.default_rng(0))} == {(1012,)}
    assert done.sizes is not None
    assert done.sizes.describe() == "workload.images: 1024x768 -> 1,012, 640x480 -> 391 LM tokens (a rule)"


@pytest.mark.parametrize(("table", "needle"), [
    ({"images": [[1024, 768]], "item_tokens": [5]}, "workload.item_tokens: give LM tokens or"),
    ({"images": [[1024, 768]], "mix": "ultravox-audio"}, "workload.images are image items, but mix"),
    ({"audio_s": [5], "mix": "llava-image"}, "workload.audio_s are audio items"),
    ({"images": [[1024, 768]], "audio_s": [5]}, "give one of workload.images, workload.audio_s"),
    ({"image_weights": [1]}, "workload.image_weights weighs workload.images, which is not given"),
    ({"images": [[1024, 768]], "image_weights": [1, 2]}, "workload.image_weights must have one weight"),
    ({"images": [[1024, 768]], "image_weights": [0]}, "workload.image_weights must not all be zero"),
    ({"images": []}, "workload.images must be a non-empty list"),
    ({"images": [[1024]]}, r"workload.images\[0\] must be \[width, height\]"),
    ({"images": [[0, 768]]}, r"workload.images\[0\]\[0\] \(width\) must be >= 1"),
    ({"images": [[10.5, 768]]}, r"workload.images\[0\]\[0\] \(width\) must be an integer"),
    ({"videos": [[1280, 720]]}, r"workload.videos\[0\] must be a table"),
    ({"videos": [{"frames": 16}]}, r"workload.videos\[0\].size is required"),
    ({"videos": [{"size": [1280, 720], "frames": 16, "fps": 2}]}, r"workload.videos\[0\].fps: give frames"),
    ({"videos": [{"size": [1280, 720], "seconds": 10}]}, r"workload.videos\[0\].fps is required"),
    ({"videos": [{"size": [1280, 720], "frames": 4, "codec": "h264"}]}, r"workload.videos\[0\].codec is not"),
    ({"audio_s": [5, -1]}, r"workload.audio_s\[1\] must be > 0"),
    ({"audio_s": [float("nan")]}, r"workload.audio_s\[0\] must be finite"),
])
def test_bad_raw_sizes_name_the_key(table: dict[str, object], needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        _spec(**table)
