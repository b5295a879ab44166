"""The runner's own sanity cases: a good run succeeds and writes only its
output, and usage errors exit 2."""
from hostile_support import Case, png, toy_config

CASES = [
    Case(name="basics/encode-one-png",
         files={"c.toml": toy_config(), "a.png": png(28, 28)},
         args=["encode", "-c", "c.toml", "-o", "e.safetensors", "a.png"],
         exit=0, message=r"wrote 1 embeddings", outputs=["e.safetensors"]),
    Case(name="basics/unknown-command", args=["frobnicate"], exit=2,
         message=r"unknown command 'frobnicate'"),
    Case(name="basics/config-missing", args=["run", "--config", "nope.toml"], exit=2,
         message=r"nope\.toml"),
]
