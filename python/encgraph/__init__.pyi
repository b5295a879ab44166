from ._encgraph import (
    ConfigError as ConfigError,
    DeviceError as DeviceError,
    Error as Error,
    InputError as InputError,
    ItemResult as ItemResult,
    OutputTensor as OutputTensor,
    PluginError as PluginError,
    Runtime as Runtime,
    __version__ as __version__,
    plugins as plugins,
)
