"""The Whisper encoder tower of an imported spec (Qwen2-Audio, Ultravox).

See :mod:`calibration.importers.towers` for what a tower function takes and returns.
"""

from __future__ import annotations

from calibration.importers import processor_rules as rules
from calibration.importers._read import Keys, derived, value
from calibration.importers.tower_parts import (
    TYPICAL_AUDIO_S,
    Tower,
    tiles_mapping,
)


def whisper(tower: Keys, top: Keys, lm_hidden: int, *, stack: int | None) -> Tower:
    """Whisper encoder: Qwen2-Audio (pooled by 2, padded to 30 s) or Ultravox (frames stacked)."""
    hid, mel = value(tower.get("d_model")), value(tower.get("num_mel_bins"))
    positions = value(tower.get("max_source_positions"))
    enc = {
        "num_layers": tower.get("encoder_layers"),
        "hidden_size": tower.get("d_model"),
        "intermediate_size": tower.get("encoder_ffn_dim"),
        "num_heads": tower.get("encoder_attention_heads"),
        "mlp_num_matrices": derived(2, "Whisper MLP fc1 -> GELU -> fc2"),
    }
    enc["stem_params"] = derived(
        mel * hid * 3 + hid * hid * 3 + positions * hid,
        f"conv1 {mel}*{hid}*3 + conv2 {hid}*{hid}*3 + {positions} positions * {hid}",
    )
    layers = enc["num_layers"]
    if stack is None:  # Qwen2-Audio: every clip runs the full 30 s window
        enc["projector_params"] = derived(
            hid * lm_hidden, f"multi_modal_projector Linear({hid}->{lm_hidden})"
        )
        per_clip = positions // 2
        mapping = tiles_mapping(
            per_clip,
            per_clip,
            1,
            positions,
            {
                "base": f"max_source_positions {positions} / avg-pool 2",
                "per_tile": "one 30 s window",
                "max_tiles": "clips are cut at 30 s",
                "positions": "every clip is padded to the 30 s window",
            },
        )
        tokens = rules.qwen2_audio_tokens(TYPICAL_AUDIO_S)
        seconds = positions * 2 / rules.MEL_FRAMES_PER_S
        processor = {
            "kind": "whisper",
            "max_audio_s": derived(
                seconds,
                f"max_source_positions {positions} x stride 2 / {rules.MEL_FRAMES_PER_S} mel frames/s",
            ),
        }
        typical = derived(tokens, f"{TYPICAL_AUDIO_S:g} s of audio -> {tokens} LM tokens")
        return Tower(enc, mapping, typical, [], processor)
    proj_hidden = value(top.get("hidden_size"))
    enc["projector_params"] = derived(
        hid * stack * proj_hidden + proj_hidden // 2 * lm_hidden,
        f"Linear({hid}*{stack} -> {proj_hidden}) + SwiGLU(-> {proj_hidden // 2}) + "
        f"Linear({proj_hidden // 2} -> "
        f"{lm_hidden})",
    )
    mapping = {
        "kind": "linear",
        "positions_per_lm_token": top.get("stack_factor"),
        "segment_positions": tower.get("max_source_positions"),
        "window_positions": derived(0, "no windowed attention"),
        "num_full_attention_layers": derived(value(layers), "every encoder layer attends over its window"),
    }
    tokens = rules.ultravox_tokens(TYPICAL_AUDIO_S, stack_factor=stack)
    return Tower(
        enc,
        mapping,
        derived(
            tokens,
            f"{TYPICAL_AUDIO_S:g} s of audio at 50 positions/s / stack_factor {stack} -> {tokens} LM tokens",
        ),
        [],
        {"kind": "whisper", "stack_factor": top.get("stack_factor", default=stack)},
    )
