"""`encgraph serve` refusing bad setups before it listens: each exits 2 with a
message naming the option, key or folder and the fix (the protocol itself is
tested by tests/host/serve_e2e.py)."""
from hostile_support import Case, toy_config

CASES = [
    Case(name="serve/no-model", args=["serve"], exit=2,
         message=r"exactly one of --config FILE and --model-repository DIR"),
    Case(name="serve/config-and-repository", files={"c.toml": toy_config()},
         args=["serve", "--config", "c.toml", "--model-repository", "."], exit=2,
         message=r"exactly one of"),
    Case(name="serve/http-not-host-port", files={"c.toml": toy_config()},
         args=["serve", "--config", "c.toml", "--http", "localhost"], exit=2,
         message=r"--http 'localhost' is not HOST:PORT"),
    Case(name="serve/http-port-too-large", files={"c.toml": toy_config()},
         args=["serve", "--config", "c.toml", "--http", "127.0.0.1:70000"], exit=2,
         message=r"is not HOST:PORT"),
    Case(name="serve/grpc-not-host-port", files={"c.toml": toy_config()},
         args=["serve", "--config", "c.toml", "--http", "127.0.0.1:0", "--grpc", "8001"], exit=2,
         message=r"--grpc '8001' is not HOST:PORT"),
    # A build without gRPC refuses --grpc itself, naming the packages to build with.
    Case(name="serve/grpc-not-an-address", files={"c.toml": toy_config()},
         args=["serve", "--config", "c.toml", "--http", "127.0.0.1:0", "--grpc", "999.1.1.1:0"], exit=2,
         message=r"cannot listen for gRPC on 999\.1\.1\.1:0|built without gRPC.*libgrpc\+\+-dev"),
    Case(name="serve/host-not-an-address", files={"c.toml": toy_config('[serve]\nhost = "example.org"\n')},
         args=["serve", "--config", "c.toml", "--set", "serve.port=0"], exit=2,
         message=r"serve.host 'example.org' is not an IP address"),
    Case(name="serve/repository-not-a-folder", files={"c.toml": toy_config()},
         args=["serve", "--model-repository", "c.toml"], exit=2,
         message=r"--model-repository c\.toml is not a folder"),
    Case(name="serve/key-out-of-range", files={"c.toml": toy_config("[serve]\nmax_queue_items = 0\n")},
         args=["check-config", "c.toml"], exit=2,
         message=r"serve\.max_queue_items: must lie in \[1, 16777216\], got 0"),
    Case(name="serve/unknown-key", files={"c.toml": toy_config("[serve]\ncache_size = 1\n")},
         args=["check-config", "c.toml"], exit=2,
         message=r"unknown key 'serve\.cache_size'"),
]
