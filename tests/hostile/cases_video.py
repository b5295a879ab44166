"""Hostile video files (issue 13): MP4, MKV and WebM read through FFmpeg's
mov and matroska demuxers only, so a playlist, concat script or image named
clip.mp4 is refused rather than followed; truncated, empty, garbage,
audio-only, one-frame and mis-sized files are exit code 2 naming the file
and the fix; special files (FIFO, folders) refused without blocking; the
frame and pixel limits hold before anything is decoded; an output naming
the video is refused; trace lines with "video" are checked like the others.
The valid videos are Matroska files of raw RGB24 frames written here with
the standard library (V_UNCOMPRESSED with an 'RGB\\x18' colour space)."""
import json
import os
import struct

from hostile_support import Case, png, toy_config

CFG = toy_config()


def _el(eid, payload):
    """One EBML element: its id, an 8-byte size and the payload."""
    if isinstance(payload, int):
        payload = payload.to_bytes(max(1, (payload.bit_length() + 7) // 8), "big")
    elif isinstance(payload, str):
        payload = payload.encode()
    elif isinstance(payload, list):
        payload = b"".join(payload)
    return eid + b"\x01" + len(payload).to_bytes(7, "big") + payload


def mkv(frames=8, width=28, height=28, fps=10, doctype="matroska", video=True, audio=False,
        fourcc=b"RGB\x18", frame_bytes=None):
    """A Matroska file of `frames` raw RGB24 frames at `fps` (and a PCM track)."""
    header = _el(b"\x1a\x45\xdf\xa3", [
        _el(b"\x42\x86", 1), _el(b"\x42\xf7", 1), _el(b"\x42\xf2", 4), _el(b"\x42\xf3", 8),
        _el(b"\x42\x82", doctype), _el(b"\x42\x87", 4), _el(b"\x42\x85", 2)])
    info = _el(b"\x15\x49\xa9\x66", [_el(b"\x2a\xd7\xb1", 1000000), _el(b"\x4d\x80", "hostile"),
                                     _el(b"\x57\x41", "hostile")])
    tracks = []
    if video:
        v = [_el(b"\xb0", width), _el(b"\xba", height)]
        if fourcc:
            v.append(_el(b"\x2e\xb5\x24", fourcc))
        tracks.append(_el(b"\xae", [
            _el(b"\xd7", 1), _el(b"\x73\xc5", 1), _el(b"\x83", 1), _el(b"\x86", "V_UNCOMPRESSED"),
            _el(b"\xe0", v), _el(b"\x23\xe3\x83", 1000000000 // fps)]))
    if audio:
        a = [_el(b"\xb5", struct.pack(">d", 8000.0)), _el(b"\x9f", 1), _el(b"\x62\x64", 16)]
        tracks.append(_el(b"\xae", [_el(b"\xd7", 2), _el(b"\x73\xc5", 2), _el(b"\x83", 2),
                                    _el(b"\x86", "A_PCM/INT/LIT"), _el(b"\xe1", a)]))
    body = [info, _el(b"\x16\x54\xae\x6b", tracks)]
    size = frame_bytes if frame_bytes is not None else width * height * 3
    per_cluster = 100  # block times are 16-bit milliseconds from the cluster's
    for start in range(0, max(frames, 1 if audio else 0), per_cluster):
        blocks = [_el(b"\xe7", start * 1000 // fps)]
        for i in range(start, min(frames, start + per_cluster)):
            if video:
                px = bytes((x * 7 + i * 13) % 256 for x in range(size))
                rel = (i - start) * 1000 // fps
                blocks.append(_el(b"\xa3", b"\x81" + struct.pack(">hB", rel, 0x80) + px))
        if audio:
            blocks.append(_el(b"\xa3", b"\x82" + struct.pack(">hB", 0, 0x80) + bytes(1600)))
        body.append(_el(b"\x1f\x43\xb6\x75", blocks))
    return header + _el(b"\x18\x53\x80\x67", body)


CLIP = mkv()
# The front of an MP4: its 'ftyp' box, then nothing an MP4 demuxer can use.
FTYP = b"\x00\x00\x00\x1cftypisom\x00\x00\x02\x00isomiso2mp41" + b"\x00" * 64


def encode(*args, config="c.toml"):
    return ["encode", "-c", config, "-o", "e.st"] + list(args)


def video_case(name, data, message, name_in_folder="clip.mkv", extra=(), exit=2, outputs=(),
               setup=None, check=None, config=CFG):
    """`encode` of one video file holding `data` (None: made by `setup`)."""
    files = {"c.toml": config}
    if data is not None:
        files[name_in_folder] = data
    return Case(name="video/" + name, files=files, args=encode(*extra, name_in_folder), exit=exit,
                message=message, outputs=list(outputs), setup=setup, check=check)


def trace_case(name, lines, message, exit=2, files=None, outputs=(), check=None, extra=()):
    f = {"c.toml": CFG, "v.mkv": CLIP, "t.jsonl": "".join(json.dumps(l) + "\n" for l in lines)}
    f.update(files or {})
    return Case(name="video/trace-" + name, files=f,
                args=encode("--trace", "t.jsonl", *extra), exit=exit, message=message,
                outputs=list(outputs), check=check)


def report_indices(expected):
    def check(ctx, result):
        with open(ctx.path("r.json")) as f:
            videos = json.load(f)["workload"].get("videos", [])
        got = [v["frame_indices"] for v in videos]
        return [] if got == expected else [f"report frame_indices {got}, expected {expected}"]
    return check


def mkfifo(ctx):
    os.mkfifo(ctx.path("clip.mkv"))


def mkdir(ctx):
    os.makedirs(ctx.path("clip.mp4"))


CASES = [
    # What works: raw RGB frames in Matroska and WebM, listed in the report.
    video_case("ok-mkv", CLIP, r"wrote 1 embeddings", exit=0, outputs=["e.st", "r.json"],
               extra=("--report", "r.json"), check=report_indices([[0, 2, 5, 7]])),
    video_case("ok-webm", mkv(doctype="webm"), r"wrote 1 embeddings", name_in_folder="clip.webm",
               exit=0, outputs=["e.st"]),
    video_case("ok-colon-in-name", CLIP, r"wrote 1 embeddings", name_in_folder="a:b.mkv", exit=0,
               outputs=["e.st"]),
    video_case("sniffed-without-extension", mkv(frames=2), r"wrote 1 embeddings",
               name_in_folder="clip", exit=0, outputs=["e.st"]),
    video_case("video-fps-setting", mkv(frames=40), r"wrote 1 embeddings", exit=0,
               outputs=["e.st", "r.json"],
               extra=("--report", "r.json", "--set", "video.fps=0.5", "--set",
                      "video.min_frames=2"),
               check=report_indices([[0, 39]])),
    # Not a video FFmpeg may read.
    video_case("zero-bytes", b"", [r"clip\.mp4", r"is not a video file FFmpeg can read"],
               name_in_folder="clip.mp4"),
    video_case("garbage-mp4", bytes(range(256)) * 16,
               [r"clip\.mp4", r"not a video file FFmpeg can read|truncated or corrupt"],
               name_in_folder="clip.mp4"),
    video_case("ftyp-then-nothing", FTYP, [r"'clip'", r"truncated or corrupt|not a video file"],
               name_in_folder="clip"),
    video_case("png-named-mp4", png(28, 28), [r"clip\.mp4", r"not a video file FFmpeg can read"],
               name_in_folder="clip.mp4"),
    video_case("hls-playlist-named-mp4", "#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXTINF:1,\n"
               "/etc/passwd\n#EXT-X-ENDLIST\n", [r"clip\.mp4", r"not a video file FFmpeg can read"],
               name_in_folder="clip.mp4"),
    video_case("concat-script-named-mkv", "ffconcat version 1.0\nfile /etc/hostname\n",
               [r"clip\.mkv", r"not a video file FFmpeg can read"]),
    # Damaged videos.
    video_case("truncated-half", CLIP[:len(CLIP) // 2], [r"clip\.mkv", r"truncated or corrupt"]),
    video_case("truncated-last-bytes", CLIP[:-100], [r"clip\.mkv", r"truncated or corrupt"]),
    video_case("truncated-in-header", CLIP[:60], [r"clip\.mkv", r"truncated|corrupt|no video"]),
    video_case("frames-too-short", mkv(frame_bytes=100), [r"clip\.mkv", r"is corrupt"]),
    video_case("no-pixel-format", mkv(fourcc=None), [r"clip\.mkv", r"cannot be decoded"]),
    video_case("audio-only", mkv(video=False, audio=True), [r"clip\.mkv", r"has no video stream"]),
    video_case("no-frames", mkv(frames=0), [r"clip\.mkv", r"no frames|empty or truncated"]),
    video_case("one-frame", mkv(frames=1), [r"clip\.mkv", r"has 1 frame", r"at least 2"]),
    video_case("audio-and-video", mkv(audio=True), r"wrote 1 embeddings", exit=0,
               outputs=["e.st"]),
    # Special files: refused at once.
    video_case("fifo", None, [r"clip\.mkv", r"FIFO"], setup=mkfifo),
    video_case("directory-named-mp4", None, [r"clip\.mp4", r"is a directory"],
               name_in_folder="clip.mp4", setup=mkdir),
    video_case("missing", None, [r"clip\.mkv", r"does not exist"]),
    # Limits before any frame is decoded.
    video_case("frames-over-limit", mkv(frames=200, width=2, height=2),
               [r"clip\.mkv", r"40 frames sampled", r"limits\.max_frames_per_video"],
               extra=("--set", "limits.max_frames_per_video=8")),
    video_case("pixels-over-limit", CLIP, [r"clip\.mkv", r"limits\.max_image_pixels"],
               extra=("--set", "limits.max_image_pixels=100")),
    video_case("huge-frames-in-header", mkv(frames=2, width=15000, height=15000, frame_bytes=16),
               [r"clip\.mkv", r"limits\.max_image_pixels"]),
    video_case("many-frames-capped-by-max-frames", mkv(frames=5000, width=2, height=2),
               [r"clip\.mkv", r"768 frames sampled", r"limits\.max_frames_per_video"],
               extra=("--set", "limits.max_frames_per_video=100")),
    # An image-only plugin refuses a video before running (SigLIP: no video path).
    Case(name="video/image-only-plugin",
         files={"c.toml": toy_config().replace('name = "toy"', 'name = "siglip"\nweights = '
                                               '"random"').replace(
             "hidden = 8", "hidden_size = 64\nintermediate_size = 128\nnum_hidden_layers = 1\n"
             "num_attention_heads = 4\nimage_size = 32\npatch_size = 8\ndtype = \"f32\""),
                "v.mkv": CLIP},
         args=encode("v.mkv"), message=[r"video items", r"'siglip' takes images only"]),
    # Outputs that would overwrite the video.
    Case(name="video/output-is-the-video", files={"c.toml": CFG, "v.mkv": CLIP},
         args=["encode", "-c", "c.toml", "-o", "v.mkv", "v.mkv"],
         message=[r"v\.mkv", r"video"]),
    Case(name="video/report-is-the-video", files={"c.toml": CFG, "v.mkv": CLIP},
         args=["encode", "-c", "c.toml", "-o", "e.st", "--report", "v.mkv", "v.mkv"],
         message=[r"v\.mkv", r"video"]),
    # [video] settings.
    video_case("config-fps-negative", CLIP, [r"video\.fps", r"positive"],
               extra=("--set", "video.fps=-1")),
    video_case("config-sampling-unknown", CLIP, [r"video\.sampling", r"qwen3_vl"],
               extra=("--set", "video.sampling=\"fast\"")),
    video_case("config-min-over-max", CLIP, [r"video\.max_frames", r"video\.min_frames"],
               extra=("--set", "video.min_frames=9", "--set", "video.max_frames=4")),
    Case(name="video/folder-processor-config-not-json",
         files={"c.toml": toy_config(plugin='weights = "model"'), "v.mkv": CLIP,
                "model/video_preprocessor_config.json": "{not json"},
         args=encode("v.mkv"), message=[r"video_preprocessor_config\.json", r"not a JSON object"]),
    # Trace lines.
    trace_case("ok", [{"video": "v.mkv", "id": "clip"}, {"file": "a.png"}],
               r"wrote 2 embeddings", exit=0, files={"a.png": png(28, 28)}, outputs=["e.st"]),
    Case(name="video/trace-relative-to-trace-folder",
         files={"c.toml": CFG, "sub/v.mkv": CLIP, "sub/t.jsonl": '{"video": "v.mkv"}\n'},
         args=encode("--trace", "sub/t.jsonl"), exit=0, message=r"wrote 1 embeddings",
         outputs=["e.st"]),
    trace_case("video-not-string", [{"video": 5}], [r"t\.jsonl:1", r"'video' must be a video"]),
    trace_case("video-empty", [{"video": ""}], [r"t\.jsonl:1", r"'video' must be a video"]),
    trace_case("video-and-file", [{"video": "v.mkv", "file": "v.mkv"}],
               [r"t\.jsonl:1", r"give one of them per line"]),
    trace_case("video-and-frames", [{"video": "v.mkv", "frames_glob": "*.png"}],
               [r"t\.jsonl:1", r"give one of them per line"]),
    trace_case("video-modality-image", [{"video": "v.mkv", "modality": "image"}],
               [r"t\.jsonl:1", r"modality"]),
    trace_case("video-frames-disagree", [{"video": "v.mkv", "frames": 3}],
               [r"t\.jsonl:1", r"'frames' = 3 but the video's sampling gives 4"]),
    trace_case("video-height-disagrees", [{"video": "v.mkv", "height": 14}],
               [r"t\.jsonl:1", r"'height' = 14 disagrees with the video's 28"]),
    trace_case("video-missing", [{"video": "nope.mkv", "id": "n"}],
               [r"t\.jsonl:1", r"nope\.mkv", r"does not exist"]),
    trace_case("video-audio-only", [{"video": "a.mkv"}],
               [r"t\.jsonl:1", r"has no video stream"],
               files={"a.mkv": mkv(video=False, audio=True)}),
]
