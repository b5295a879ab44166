#!/usr/bin/python3
"""Our decoded RGB bytes against Pillow's, on a generated corpus.

Generates JPEG files with Pillow (baseline and progressive, 4:2:0, 4:2:2,
4:4:4, grey, CMYK, every EXIF orientation) and PNG files with the writer
below (every colour type and bit depth, tRNS, interlaced, eXIf), decodes each
with pillow_decode_dump (frontend/src/image_io.cpp) and with
PIL.ImageOps.exif_transpose(Image.open(f)).convert("RGB"), as transformers'
load_image does, and requires equal bytes, except for the cases in KNOWN,
each with its reason. Exit 77 (skipped) when this Python lacks PIL.
"""
import argparse
import io
import os
import random
import shutil
import struct
import subprocess
import sys
import zlib

try:
    from PIL import Image, ImageOps
except ImportError:
    print("SKIP: /usr/bin/python3 has no PIL (apt-get install python3-pil)")
    sys.exit(77)

# Cases whose bytes differ from Pillow's, with the reason (all damaged or
# unusual files; docs/config.md lists them). Every other case is equal byte
# for byte.
KNOWN = {
    "palette_index_past_end.png": "an index past the palette's end: Pillow's default "
                                  "palette gives grey (i, i, i), libpng black",
    "idat_crc_damaged.png": "libpng refuses a damaged IDAT CRC; Pillow does not check it",
    "exif_after_idat.png": "an eXIf chunk after the image data: Pillow reads it on load, "
                           "encgraph reads only the chunks before the image data",
}

W, H = 67, 45  # odd sides: partial MCUs and edge upsampling


def pattern(w=W, h=H, seed=1):
    """Smooth gradients, sharp colour edges and noise."""
    rnd = random.Random(seed)
    px = []
    for y in range(h):
        for x in range(w):
            r = (x * 255) // max(w - 1, 1)
            g = (y * 255) // max(h - 1, 1)
            b = 255 if (x // 7 + y // 5) % 2 else 0
            n = rnd.randrange(-20, 21)
            px.append(tuple(max(0, min(255, v + n)) for v in (r, g, b)))
    im = Image.new("RGB", (w, h))
    im.putdata(px)
    return im


def exif_bytes(orientation):
    exif = Image.Exif()
    exif[0x0112] = orientation
    return exif.tobytes()


def jpeg_cases(out):
    rgb = pattern()
    cases = []

    def save(name, im, **kw):
        path = os.path.join(out, name + ".jpg")
        im.save(path, "JPEG", **kw)
        cases.append(name)

    for prog in (False, True):
        for sub, label in ((2, "420"), (1, "422"), (0, "444")):
            save(("progressive_" if prog else "baseline_") + label, rgb,
                 quality=90, subsampling=sub, progressive=prog)
    save("baseline_420_q50", rgb, quality=50, subsampling=2)
    save("baseline_444_q100", rgb, quality=100, subsampling=0)
    save("baseline_420_optimized", rgb, quality=85, optimize=True)
    save("grey", rgb.convert("L"), quality=90)
    save("grey_progressive", rgb.convert("L"), quality=90, progressive=True)
    save("cmyk", rgb.convert("CMYK"), quality=90)
    save("cmyk_progressive", rgb.convert("CMYK"), quality=90, progressive=True)
    save("tiny_1x1", pattern(1, 1), quality=90)
    save("wide_203x3_420", pattern(203, 3, seed=2), quality=90)
    for o in range(2, 9):
        save("exif_orientation_%d" % o, rgb, quality=90, exif=exif_bytes(o))
    save("progressive_exif_6", rgb, quality=90, progressive=True, exif=exif_bytes(6))
    return [n + ".jpg" for n in cases]


def chunk(kind, data):
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))


def pack_row(samples, depth):
    if depth == 8:
        return bytes(samples)
    if depth == 16:
        return b"".join(struct.pack(">H", s) for s in samples)
    per = 8 // depth
    out = bytearray()
    for i in range(0, len(samples), per):
        byte = 0
        group = samples[i:i + per]
        for k, s in enumerate(group):
            byte |= s << (8 - depth * (k + 1))
        out.append(byte)
    return bytes(out)


ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4),
         (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2))


def write_png(path, w, h, depth, ctype, pixel, interlace=False, extra=b"", after=b""):
    """pixel(x, y) gives the samples of one pixel (a tuple)."""
    raw = bytearray()
    passes = ADAM7 if interlace else ((0, 0, 1, 1),)
    for x0, y0, dx, dy in passes:
        xs = range(x0, w, dx)
        if not len(xs):
            continue
        for y in range(y0, h, dy):
            samples = [s for x in xs for s in pixel(x, y)]
            raw += b"\0" + pack_row(samples, depth)
    ihdr = struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, 1 if interlace else 0)
    data = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + extra
    data += chunk(b"IDAT", zlib.compress(bytes(raw), 9)) + after + chunk(b"IEND", b"")
    with open(path, "wb") as f:
        f.write(data)


def png_cases(out):
    rnd = random.Random(3)
    w, h = 37, 29
    noise = [[rnd.randrange(0, 65536) for _ in range(w)] for _ in range(h)]

    def grey(depth):
        top = (1 << depth) - 1
        return lambda x, y: ((noise[y][x] * (x + 1) // (w + 1)) % (top + 1),)

    def colour(depth, n):
        top = (1 << depth) - 1
        return lambda x, y: tuple((noise[y][x] * (k + 3) + x * 977 * (k + 1) + y * 131)
                                  % (top + 1) for k in range(n))

    cases = []

    def add(name, *args, **kw):
        write_png(os.path.join(out, name + ".png"), *args, **kw)
        cases.append(name + ".png")

    for d in (1, 2, 4, 8, 16):
        add("grey_%d" % d, w, h, d, 0, grey(d))
    add("grey_8_trns", w, h, 8, 0, grey(8), extra=chunk(b"tRNS", struct.pack(">H", 7)))
    add("grey_16_small_values", w, h, 16, 0, lambda x, y: ((x * 7 + y) % 300,))
    for d in (8, 16):
        add("rgb_%d" % d, w, h, d, 2, colour(d, 3))
        add("grey_alpha_%d" % d, w, h, d, 4, colour(d, 2))
        add("rgba_%d" % d, w, h, d, 6, colour(d, 4))
    add("rgb_8_trns", w, h, 8, 2, colour(8, 3),
        extra=chunk(b"tRNS", struct.pack(">HHH", 1, 2, 3)))
    add("rgb_8_gamma", w, h, 8, 2, colour(8, 3),
        extra=chunk(b"gAMA", struct.pack(">I", 100000)))
    for d in (1, 2, 4, 8):
        n = 1 << d
        plte = chunk(b"PLTE", bytes(rnd.randrange(256) for _ in range(3 * n)))
        add("palette_%d" % d, w, h, d, 3, colour(d, 1), extra=plte)
        if d == 8:
            add("palette_8_trns", w, h, d, 3, colour(d, 1),
                extra=plte + chunk(b"tRNS", bytes(range(0, 256, 2))))
    for name, d, t, n in (("grey_1", 1, 0, 1), ("grey_16", 16, 0, 1), ("rgb_8", 8, 2, 3),
                          ("rgba_16", 16, 6, 4), ("grey_alpha_8", 8, 4, 2)):
        px = grey(d) if t == 0 else colour(d, n)
        add("interlaced_" + name, w, h, d, t, px, interlace=True)
    plte = chunk(b"PLTE", bytes(rnd.randrange(256) for _ in range(3 * 16)))
    add("interlaced_palette_4", w, h, 4, 3, colour(4, 1), interlace=True, extra=plte)
    add("interlaced_tiny_3x2", 3, 2, 8, 2, colour(8, 3), interlace=True)
    for o in (3, 6, 8):
        add("exif_orientation_%d" % o, w, h, 8, 2, colour(8, 3),
            extra=chunk(b"eXIf", exif_bytes(o)[6:]))
    # The known differences (KNOWN).
    add("palette_index_past_end", 4, 1, 8, 3, lambda x, y: (x * 3,),
        extra=chunk(b"PLTE", bytes(range(12))))
    add("idat_crc_damaged", 4, 1, 8, 0, lambda x, y: (x * 50,))
    path = os.path.join(out, "idat_crc_damaged.png")
    with open(path, "rb") as f:
        data = bytearray(f.read())
    at = data.index(b"IDAT")
    data[at + 4 + struct.unpack(">I", data[at - 4:at])[0]] ^= 1
    with open(path, "wb") as f:
        f.write(data)
    add("exif_after_idat", w, h, 8, 2, colour(8, 3), after=chunk(b"eXIf", exif_bytes(6)[6:]))
    # Written by Pillow itself: adaptive row filters.
    src = pattern(53, 31, seed=4)
    for mode in ("RGB", "RGBA", "L", "P", "LA", "1"):
        name = "pillow_" + mode.lower()
        im = src.convert(mode) if mode != "RGBA" else src.copy()
        if mode == "RGBA":
            im.putalpha(128)
        im.save(os.path.join(out, name + ".png"))
        cases.append(name + ".png")
    return cases


def pillow_rgb(path):
    with Image.open(path) as im:
        im = ImageOps.exif_transpose(im)
        rgb = im.convert("RGB")
        return rgb.size, rgb.tobytes()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    corpus = os.path.join(args.work, "corpus")
    decoded = os.path.join(args.work, "decoded")
    os.makedirs(corpus)
    os.makedirs(decoded)
    files = jpeg_cases(corpus) + png_cases(corpus)
    subprocess.run([args.dump, decoded] + [os.path.join(corpus, f) for f in files], check=True)
    failures = 0
    print("| case | equal bytes | note |")
    print("|---|---|---|")
    for f in files:
        size, want = pillow_rgb(os.path.join(corpus, f))
        with open(os.path.join(decoded, f + ".rgb"), "rb") as got_file:
            got = got_file.read()
        head, _, body = got.partition(b"\n")
        if got.startswith(b"ERROR"):
            equal, note = False, got.decode(errors="replace")
        else:
            gw, gh = (int(v) for v in head.split())
            if (gw, gh) != size:
                equal, note = False, "size %dx%d, Pillow %dx%d" % (gw, gh, *size)
            elif body != want:
                diff = [abs(a - b) for a, b in zip(body, want) if a != b]
                equal = False
                note = "%d of %d bytes differ, at most by %d" % (len(diff), len(want), max(diff))
            else:
                equal, note = True, "%dx%d" % size
        if not equal and f in KNOWN:
            note += " (known: %s)" % KNOWN[f]
        elif not equal:
            failures += 1
        elif f in KNOWN:
            note += " (listed as known but now equal: update KNOWN)"
            failures += 1
        print("| %s | %s | %s |" % (f, "yes" if equal else "NO", note))
    print("%d cases, %d unexpected differences" % (len(files), failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
