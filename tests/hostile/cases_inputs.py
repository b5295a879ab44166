"""Hostile images and traces (classes 3, 5 and 7): only PNG and JPEG, known by
their signature (GIF, BMP, PGM, ... refused by name); damaged files named
with the decoder's own reason; the size limit applied to the header before
decoding; special files (FIFO, /dev/zero, folders) refused without blocking;
trace lines checked when the trace is read (ids, types, sizes, frames,
items), naming the file, the line and the fix; and file names that would
have broken the TOML the file list used to travel in."""
import base64
import json
import os

from hostile_support import Case, png, png_header_only, toy_config

CFG = toy_config()
PNG = png(28, 28)
# A 28x28 baseline JPEG (written by stb_image_write, quality 90).
JPEG = base64.b64decode(
    "/9j/4AAQSkZJRgABAQAAAQABAAD/2wCEAAMCAgMCAgMDAwMEAwMEBQgFBQQEBQoHBwYIDAoMDAsKCwsNDhIQDQ4RDgsL"
    "EBYQERMUFRUVDA8XGBYUGBIUFRQBAwQEBQQFCQUFCRQNCw0UFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQU"
    "FBQUFBQUFBQUFBQUFBQUFP/AABEIABwAHAMBIgACEQEDEQH/xAGiAAABBQEBAQEBAQAAAAAAAAAAAQIDBAUGBwgJCgsQ"
    "AAIBAwMCBAMFBQQEAAABfQECAwAEEQUSITFBBhNRYQcicRQygZGhCCNCscEVUtHwJDNicoIJChYXGBkaJSYnKCkqNDU2"
    "Nzg5OkNERUZHSElKU1RVVldYWVpjZGVmZ2hpanN0dXZ3eHl6g4SFhoeIiYqSk5SVlpeYmZqio6Slpqeoqaqys7S1tre4"
    "ubrCw8TFxsfIycrS09TV1tfY2drh4uPk5ebn6Onq8fLz9PX29/j5+gEAAwEBAQEBAQEBAQAAAAAAAAECAwQFBgcICQoL"
    "EQACAQIEBAMEBwUEBAABAncAAQIDEQQFITEGEkFRB2FxEyIygQgUQpGhscEJIzNS8BVictEKFiQ04SXxFxgZGiYnKCkq"
    "NTY3ODk6Q0RFRkdISUpTVFVWV1hZWmNkZWZnaGlqc3R1dnd4eXqCg4SFhoeIiYqSk5SVlpeYmZqio6Slpqeoqaqys7S1"
    "tre4ubrCw8TFxsfIycrS09TV1tfY2dri4+Tl5ufo6ery8/T19vf4+fr/2gAMAwEAAhEDEQA/APnT4f6J/q/lr6V+H+if"
    "6v5a8q+H+if6v5a+lfh/on+r+Wv1k/MTu9LsTbafDEvyvMdp652jr/QfjVzxL8XfAvwuubXSvE+tf2ZfzW4ukh+xzy5j"
    "LMobMaMOqMMZzxVvTBbRz3F9czxW9haxlnuJnVI440GWZmPAUfMck9K+FPiT4k/4Wj491zxOtv8AZ4b64/cRlNrCFEWO"
    "LcNzfPsRd2CRuzjjFfxhm8IeIHFGKqVJNYaguSLi1rZ20burSfNLbay8z938PODqfEdWpDFOUaUI3bjZPmey1TW129Ht"
    "5nonw/0T/V/LX0L4csRYaYXwQ7jy0xwcnvn25P4V5h8P7SP938te0WUSNeWcW0bVj3A98k4P/oIr+jOP86qZDw7icVR/"
    "iNckfJz0v8ldrzSR+J4WmqtZRexwH7Rvjf8A4QH4V/2NanbqviTfYx/LnZbAD7Q3KlTlWWPGQf3u5T8tfLVrNpWk20UN"
    "9qOnZSsu8R3E6RsV6ZwT04P5V6L+014ivNc+N91pFy/+gaJbwQWkKs20eZEkzuQSRvJfBIAyqID93NfLXjC8k1jxRqb3"
    "Bz5Fw9tGoJwqISoABJxnGTjuSe9fmHhxw7D+zIJuzmueTX974V8o2+d+5/W9POV4dcJ4TFUqSqVsTJSd3pZq6130jyq3"
    "dtn/2Q==")


def encode(*args, config="c.toml"):
    return ["encode", "-c", config, "-o", "e.st"] + list(args)


def image_case(name, data, message, exit=2, extra=None, args=None):
    """`encode` of one image file `x` holding `data`; nothing may be written."""
    return Case(name="inputs/image-" + name, files={"c.toml": CFG, "x": data},
                args=args or encode(*(extra or []), "x"), exit=exit, message=message)


def trace_case(name, text, message, files=None, sets=(), exit=2):
    """`encode --trace t.jsonl`; a bad line stops it before anything is written."""
    f = {"c.toml": CFG, "t.jsonl": text, "a.png": PNG}
    f.update(files or {})
    argv = encode("--trace", "t.jsonl")
    for s in sets:
        argv += ["--set", s]
    return Case(name="inputs/trace-" + name, files=f, args=argv, exit=exit, message=message)


def geometry(**fields):
    line = {"height": 28, "width": 28}
    line.update(fields)
    return json.dumps(line) + "\n"


OK_LINE = geometry()
ONLY = r"only PNG and JPEG are accepted"


def absent(*needles):
    """A check that none of `needles` occurs in the output (the wrong reason)."""
    def check(ctx, result):
        return [f"the output says {n!r}" for n in needles if n in result.text]
    return check


IMAGES = [
    image_case("gif", b"GIF89a\x01\x00\x01\x00\x80\x00\x00" + bytes(20) + b";",
               [r"image 'x' is a GIF image", ONLY]),
    image_case("gif87", b"GIF87a" + bytes(30), [r"is a GIF image", ONLY]),
    image_case("bmp", b"BM" + bytes(60), [r"is a BMP image", ONLY]),
    image_case("pgm", b"P5\n2 2\n255\n\x00\x00\x00\x00", [r"is a PNM image \(PBM, PGM, PPM\)", ONLY]),
    image_case("ppm-ascii", b"P3\n1 1\n255\n0 0 0\n", [r"is a PNM image", ONLY]),
    image_case("psd", b"8BPS" + bytes(40), [r"is a Photoshop \(PSD\) image", ONLY]),
    image_case("webp", b"RIFF\x00\x00\x00\x00WEBPVP8 " + bytes(20), [r"is a WebP image", ONLY]),
    image_case("tiff", b"II*\x00" + bytes(20), [r"is a TIFF image", ONLY]),
    image_case("hdr", b"#?RADIANCE\n" + bytes(20), [r"is an HDR \(Radiance\) image", ONLY]),
    image_case("text", b"hello, this is not an image\n",
               [r"image 'x' is not a PNG or JPEG image", ONLY]),
    image_case("empty", b"", r"image 'x' is empty: name a PNG or JPEG file"),
    image_case("png-cut-in-header", PNG[:20],
               r"image 'x' is truncated: it ends inside its PNG header"),
    image_case("png-cut-in-data", PNG[:60], r"image 'x' cannot be decoded \("),
    image_case("png-bad-ihdr", PNG[:12] + b"IHDX" + PNG[16:],
               r"is a damaged PNG: its first chunk is not a 13-byte IHDR"),
    image_case("png-zero-width", png_header_only(0, 28), r"its header gives 0x28 pixels"),
    image_case("png-huge-header", png_header_only(100000, 100000),
               r"image 'x' is too large: 100000x100000 is over the limit of 178956970 pixels "
               r"\(limits\.max_image_pixels sets it\)"),
    image_case("png-over-lowered-limit", PNG,
               r"image 'x' is too large: 28x28 is over the limit of 700 pixels",
               extra=["--set", "limits.max_image_pixels=700", "--set", "workload.sizes=[[10, 10]]"]),
    image_case("jpeg-cut-in-data", JPEG[:len(JPEG) * 3 // 4],
               r"image 'x' is truncated: its JPEG data ends before the end-of-image marker"),
    image_case("jpeg-cut-in-header", JPEG[:40],
               r"image 'x' is truncated: it ends before its JPEG frame header"),
    image_case("jpeg-arithmetic", JPEG.replace(b"\xff\xc0", b"\xff\xc9", 1),
               r"is a JPEG in a coding the decoder does not support"),
    image_case("jpeg-12-bit", JPEG.replace(b"\xff\xc0\x00\x11\x08", b"\xff\xc0\x00\x11\x0c", 1),
               r"is a 12-bit JPEG; only 8-bit JPEG is supported"),
    Case(name="inputs/image-jpeg-good", files={"c.toml": CFG, "x.jpg": JPEG},
         args=encode("x.jpg"), exit=0, message=r"wrote 1 embeddings", outputs=["e.st"]),
    Case(name="inputs/image-is-a-fifo", files={"c.toml": CFG},
         setup=lambda ctx: os.mkfifo(ctx.path("x.png")), args=encode("x.png"),
         message=r"image 'x\.png' is a FIFO \(named pipe\), not a regular file", timeout=20),
    Case(name="inputs/image-is-dev-zero", files={"c.toml": CFG}, args=encode("/dev/zero"),
         message=r"image '/dev/zero' is a character device", timeout=20),
    Case(name="inputs/image-is-a-directory", files={"c.toml": CFG},
         setup=lambda ctx: os.makedirs(ctx.path("x.png")), args=encode("x.png"),
         message=r"image 'x\.png' is a directory, not a regular file: name an image file"),
    Case(name="inputs/image-missing", files={"c.toml": CFG}, args=encode("x.png"),
         message=r"image 'x\.png' does not exist: check the path"),
    Case(name="inputs/image-glob-matches-a-directory", files={"c.toml": CFG, "a.png": PNG},
         setup=lambda ctx: os.makedirs(ctx.path("b.png")), args=encode("*.png"),
         message=r"image 'b\.png' is a directory"),
    Case(name="inputs/images-over-max-items", files={"c.toml": CFG, "a.png": PNG, "b.png": PNG},
         args=encode("--set", "limits.max_items=1", "--set", "workload.count=1", "a.png", "b.png"),
         message=r"more than 1 image files \(limits\.max_items"),
]

# The truncated JPEG must carry its own reason, never stb's PNG probe's.
for c in IMAGES:
    if c.name.startswith("inputs/image-jpeg-cut"):
        c.check = absent("png sig", "unknown image type")


def name_case(name, filename, exit=0, message=r"wrote 1 embeddings", check=None):
    """An image whose file name holds bytes TOML text could not carry."""
    return Case(name="inputs/file-name-" + name, files={"c.toml": CFG},
                setup=lambda ctx: ctx.write(filename, PNG), args=encode(filename), exit=exit,
                message=message, outputs=["e.st"] if exit == 0 else [], check=check)


def tensor_named(filename):
    def check(ctx, result):
        with open(ctx.path("e.st"), "rb") as f:
            raw = f.read()
        n = int.from_bytes(raw[:8], "little")
        header = json.loads(raw[8:8 + n])
        return [] if filename in header else [f"no tensor named {filename!r}: {list(header)}"]
    return check


NAMES = [
    name_case("newline", "a\nb.png", check=tensor_named("a\nb.png")),
    name_case("quote", 'a"b.png', check=tensor_named('a"b.png')),
    name_case("toml-table-injection", 'x"]\n[output]\nreport = "r.json',
              check=tensor_named('x"]\n[output]\nreport = "r.json')),
    name_case("control-byte", "bell\x07.png", check=tensor_named("bell\x07.png")),
    name_case("backslash-and-unicode", "\\u00e9 caf\u00e9.png",
              check=tensor_named("\\u00e9 caf\u00e9.png")),
    Case(name="inputs/file-name-not-utf8", files={"c.toml": CFG},
         setup=lambda ctx: open(os.path.join(ctx.dir.encode(), b"caf\xe9.png"), "wb").write(PNG),
         args=lambda ctx: ["encode", "-c", "c.toml", "-o", "e.st",
                           os.fsdecode(b"caf\xe9.png")],
         message=r"caf\\xE9\.png': the file's name is not valid UTF-8.*rename the file"),
    Case(name="inputs/file-name-is-__metadata__", files={"c.toml": CFG, "__metadata__": PNG},
         args=encode("__metadata__"),
         message=r"'__metadata__' is reserved by safetensors: give it as '\./__metadata__'"),
]

TRACES = [
    Case(name="inputs/trace-is-a-directory", files={"c.toml": CFG},
         setup=lambda ctx: os.makedirs(ctx.path("t.jsonl")), args=encode("--trace", "t.jsonl"),
         message=r"trace 't\.jsonl' is a directory, not a regular file: name a trace file"),
    Case(name="inputs/trace-is-a-fifo", files={"c.toml": CFG},
         setup=lambda ctx: os.mkfifo(ctx.path("t.jsonl")), args=encode("--trace", "t.jsonl"),
         message=r"trace 't\.jsonl' is a FIFO", timeout=20),
    Case(name="inputs/trace-is-dev-zero", files={"c.toml": CFG},
         args=encode("--trace", "/dev/zero"), message=r"trace '/dev/zero' is a character device",
         timeout=20),
    Case(name="inputs/trace-missing", files={"c.toml": CFG}, args=encode("--trace", "no.jsonl"),
         message=r"trace 'no\.jsonl' does not exist"),
    trace_case("empty", "", r"encode needs at least one item.*the trace 't\.jsonl' is empty"),
    trace_case("over-text-limit", OK_LINE * 4,
               r"trace 't\.jsonl' is \d+ bytes, over the limit of 64 bytes for a trace "
               r"\(limits\.max_text_bytes", sets=["limits.max_text_bytes=64"]),
    trace_case("id-metadata", OK_LINE + geometry(id="__metadata__"),
               r"t\.jsonl:2 \(id \"__metadata__\"\): 'id' \"__metadata__\" is reserved by the "
               r"safetensors format"),
    trace_case("id-empty", geometry(id=""), r"t\.jsonl:1: 'id' is empty; give the item a name"),
    trace_case("id-newline", geometry(id="a\nb"), r"t\.jsonl:1 .*holds a control character"),
    trace_case("id-escape-char", geometry(id="x\x1b[2J"), r"holds a control character"),
    trace_case("id-duplicate", geometry(id="x") + OK_LINE + geometry(id="x"),
               r"t\.jsonl:3 \(id \"x\"\): id \"x\" is already the id of line 1.*must be unique"),
    trace_case("id-takes-a-default-name", geometry(id="trace/2") + OK_LINE,
               r"t\.jsonl:2: id \"trace/2\" is already the id of line 1"),
    trace_case("line-not-utf8", OK_LINE.encode() + b'{"height": 28, "width": 28, "id": "caf\xe9"}\n',
               r"t\.jsonl:2: the line is not valid UTF-8"),
    trace_case("huge-frames", geometry(modality="video", frames=1000000, id="v"),
               r"t\.jsonl:1 \(id \"v\"\): 'frames' asks for 1000000 frames, over the limit of 4096 "
               r"frames per video \(limits\.max_frames_per_video"),
    trace_case("frames-over-lowered-limit",
               '{"frames_files": ["a.png", "a.png", "a.png"], "id": "v"}\n',
               r"t\.jsonl:1 \(id \"v\"\): 'frames_files' lists 3 frames, over the limit of 2",
               sets=["limits.max_frames_per_video=2", "workload.frames=1"]),
    trace_case("huge-geometry", geometry(height=100000, width=100000),
               r"t\.jsonl:1: 100000x100000 is too large: over the limit of 178956970 pixels per "
               r"image or frame \(limits\.max_image_pixels"),
    trace_case("over-max-items", OK_LINE * 3,
               r"t\.jsonl:3: the trace holds more than 2 items \(limits\.max_items",
               sets=["limits.max_items=2", "workload.count=2"]),
    trace_case("bad-json", OK_LINE + '{"height": 28,\n', r"t\.jsonl:2: not valid JSON"),
    trace_case("not-an-object", OK_LINE + "[28, 28]\n",
               r"t\.jsonl:2: expected a JSON object, got array"),
    trace_case("height-a-string", geometry(height="28"),
               r"t\.jsonl:1: 'height' must be a positive integer, got \"28\""),
    trace_case("negative-width", geometry(width=-5),
               r"t\.jsonl:1: 'width' must be a positive integer, got -5"),
    trace_case("zero-frames", geometry(modality="video", frames=0),
               r"t\.jsonl:1: 'frames' must be a positive integer, got 0"),
    trace_case("height-too-big-for-64-bits", '{"height": 18446744073709551616, "width": 28}\n',
               r"t\.jsonl:1: 'height' must be a positive integer"),
    trace_case("missing-file", OK_LINE + '{"file": "nope.png", "id": "n"}\n',
               r"t\.jsonl:2 \(id \"n\"\): image 'nope\.png' does not exist"),
    trace_case("file-is-a-gif", '{"file": "x.gif"}\n', r"t\.jsonl:1: image 'x\.gif' is a GIF image",
               files={"x.gif": b"GIF89a" + bytes(20)}),
    trace_case("frame-is-a-fifo", '{"frames_files": ["a.png", "f.png"]}\n',
               r"t\.jsonl:1: 'frames_files': frame 2 of 2: image 'f\.png' is a FIFO"),
    trace_case("frame-huge-header", '{"frames_files": ["big.png"]}\n',
               r"t\.jsonl:1: 'frames_files': frame 1 of 1: image 'big\.png' is too large",
               files={"big.png": png_header_only(100000, 100000)}),
    trace_case("unknown-field", geometry(colour="red"), r"t\.jsonl:1: unknown field 'colour'"),
]
# The FIFO frame is made in setup (files cannot hold one).
for c in TRACES:
    if c.name == "inputs/trace-frame-is-a-fifo":
        c.setup = lambda ctx: os.mkfifo(ctx.path("f.png"))
        c.timeout = 20

CASES = IMAGES + NAMES + TRACES
