// The encgraph plugin SDK: a header-only C++17 layer over the C ABI
// (<encgraph/plugin_api.h>). docs/sdk.md describes it; examples/ use it.
#pragma once

#include <encgraph/sdk/config.hpp>
#include <encgraph/sdk/error.hpp>
#include <encgraph/sdk/host.hpp>
#include <encgraph/sdk/item.hpp>
#include <encgraph/sdk/model_info.hpp>
#include <encgraph/sdk/plugin.hpp>
#include <encgraph/sdk/tensor.hpp>
