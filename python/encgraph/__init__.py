"""encgraph: vision encoders run through captured budget graphs, from Python.

    import encgraph
    rt = encgraph.Runtime("configs/toy.toml", runtime__log_level="warn")
    rt.capture()
    [r] = rt.encode(images=["cat.png"])
    emb = torch.from_dlpack(r)          # or numpy.from_dlpack(r) on the CPU

docs/python.md documents every call, the lifetime rules and the exceptions.
"""

import os as _os

# A pip-installed package carries its plugins in encgraph/plugins: put that
# folder on the search path (after any the user set) before the core looks.
_plugins = _os.path.join(_os.path.dirname(__file__), "plugins")
if _os.path.isdir(_plugins):
    _path = _os.environ.get("ENCGRAPH_PLUGIN_PATH", "")
    if _plugins not in _path.split(":"):
        _os.environ["ENCGRAPH_PLUGIN_PATH"] = _path + (":" if _path else "") + _plugins

from ._encgraph import (  # noqa: E402
    ConfigError,
    DeviceError,
    Error,
    InputError,
    ItemResult,
    OutputTensor,
    PluginError,
    Runtime,
    __version__,
    plugins,
)

__all__ = [
    "ConfigError",
    "DeviceError",
    "Error",
    "InputError",
    "ItemResult",
    "OutputTensor",
    "PluginError",
    "Runtime",
    "__version__",
    "plugins",
]
