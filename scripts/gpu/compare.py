#!/usr/bin/env python3
"""The comparison driver: one encgraph plugin against transformers' own implementation.

  compare.py --model qwen2_5_vl|qwen3_vl|glm4v|siglip|dsocr2|internvl|llava_onevision|
             folder_media
             --bundle gpu-bundle --out-dir DIR [the model's options]
  compare.py --help                  every model's options
  compare.py --model M --help        model M's options

Each model is a spec in MODELS: the module that builds its random reference, runs the
plugin on the same inputs and judges the outputs, and what it writes. The verdict line
ends each table (PASS, FAIL, or "over target (informational)" with --informational);
the exit status is 0 on PASS or with --informational, 1 otherwise.

  qwen2_5_vl    Qwen2.5-VL-7B tower (tests' qwen_dump), per item against transformers bf16
                and fp32 on the same bf16 weights; --init hf is judged, --init fan_in is a
                stress test usually run with --informational
  qwen3_vl      Qwen3-VL-8B tower through `encgraph encode`, pooler_output and every
                deepstack output
  glm4v         GLM-4.1V-9B tower from a checkpoint folder (model.visual.*, config.json,
                preprocessor_config.json) through `encgraph encode` (compare_qwen.py)
  siglip        SigLIP so400m and base (tests' siglip_dump): last_hidden_state, pooled,
                hidden_states[-2]; then the 512-image benchmark (bench.py's) on the same
                weights unless --no-bench
  dsocr2        DeepSeek-OCR-2's vision side through `encgraph encode` on document pages
  internvl      InternVL's image encoder (InternViT-300M sizes) from a checkpoint folder
                through `encgraph encode`: one tile, an odd aspect ratio, the maximum tiling
  llava_onevision  LLaVA-OneVision's encoder (so400m tower, projector, anyres packing) from
                a checkpoint folder through `encgraph encode`: one tile, 640x480, the
                anyres_max_9 shrink (1920x1080), a strip, a 3-frame video; rows the LM gets
  folder_media  a Qwen2.5-VL checkpoint folder and PNG/JPEG/MP4 files through
                `encgraph encode`, against transformers' processor and tower; --stub runs
                without torch on the CPU

torch and transformers are imported inside functions, so --help works without them.
"""
import argparse
import importlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# model -> (module, what it checks)
MODELS = {
    "qwen2_5_vl": ("compare_qwen", "Qwen2.5-VL-7B tower, tests' qwen_dump"),
    "qwen3_vl": ("compare_qwen", "Qwen3-VL-8B tower, encgraph encode, deepstack outputs"),
    "glm4v": ("compare_qwen", "GLM-4.1V-9B tower, checkpoint folder, encgraph encode"),
    "siglip": ("compare_siglip", "SigLIP so400m and base, then the 512-image benchmark"),
    "dsocr2": ("compare_dsocr2", "DeepSeek-OCR-2 vision side on document pages"),
    "internvl": ("compare_internvl", "InternVL image encoder, checkpoint folder, tilings"),
    "llava_onevision": ("compare_llava_onevision",
                        "LLaVA-OneVision image and video encoder, checkpoint folder, packing"),
    "folder_media": ("compare_folder", "checkpoint folder and media files (Qwen2.5-VL)"),
}


def model_parser(model, full_doc=True):
    """The full parser for one model: --model, the module's options; full_doc: the module's
    docstring as the description (else the one-line summary)."""
    module = importlib.import_module(MODELS[model][0])
    ap = argparse.ArgumentParser(
        prog=f"compare.py --model {model}",
        description=f"{model}: {MODELS[model][1]}." +
        (f"\n\n{(module.__doc__ or '').strip()}" if full_doc else ""),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, choices=sorted(MODELS))
    module.add_arguments(ap, model)
    return ap, module


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    first = argparse.ArgumentParser(add_help=False)
    first.add_argument("--model", choices=sorted(MODELS))
    known, _ = first.parse_known_args(argv)
    if known.model is None:
        if "-h" in argv or "--help" in argv:
            print(__doc__)
            for model in MODELS:
                print("=" * 78)
                print(model_parser(model, full_doc=False)[0].format_help())
            return 0
        print("compare.py: --model is required: " + ", ".join(MODELS) +
              " (compare.py --help lists each one's options)", file=sys.stderr)
        return 2
    ap, module = model_parser(known.model)
    args = ap.parse_args(argv)
    return module.run(args, known.model)


if __name__ == "__main__":
    sys.exit(main())
