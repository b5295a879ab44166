#include "config_from_python.hpp"

#include "errors.hpp"

#include <toml_util.hpp>

#include <cmath>
#include <sstream>

namespace py = pybind11;

namespace encgraph::python {
namespace {

// The name a dict's key stands for in messages ("plugin.config.depth").
std::string joined(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + "." + key;
}

std::string type_name(const py::handle& value) {
  return py::str(py::type::handle_of(value).attr("__name__"));
}

bool is_pathlike(const py::handle& value) {
  return py::hasattr(value, "__fspath__");
}

std::string fspath(const py::handle& value) {
  return py::str(py::module_::import("os").attr("fspath")(value));
}

std::string key_string(const py::handle& key, const std::string& where) {
  if (!py::isinstance<py::str>(key))
    raise_config(where + ": keys must be strings, got " + type_name(key) + " " +
                 std::string(py::repr(key)));
  return key.cast<std::string>();
}

int64_t to_int64(const py::handle& value, const std::string& key) {
  try {
    return value.cast<int64_t>();
  } catch (const py::cast_error&) {
    raise_config(key + ": " + std::string(py::repr(value)) +
                 " is outside the 64-bit integer range (-2^63 .. 2^63-1)");
  }
}

toml::table to_table(const py::dict& dict, const std::string& prefix);

// Appends one Python value to `into` as a toml++ node; `key` names it in errors.
void append_node(const py::handle& value, const std::string& key, toml::array& into) {
  // bool before int: Python's bool is an int.
  if (py::isinstance<py::bool_>(value)) {
    into.push_back(value.cast<bool>());
  } else if (py::isinstance<py::int_>(value)) {
    into.push_back(to_int64(value, key));
  } else if (py::isinstance<py::float_>(value)) {
    into.push_back(value.cast<double>());
  } else if (py::isinstance<py::str>(value)) {
    into.push_back(value.cast<std::string>());
  } else if (is_pathlike(value)) {
    into.push_back(fspath(value));
  } else if (py::isinstance<py::dict>(value)) {
    into.push_back(to_table(value.cast<py::dict>(), key));
  } else if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    toml::array array;
    size_t i = 0;
    for (const py::handle element : value)
      append_node(element, key + "[" + std::to_string(i++) + "]", array);
    into.push_back(std::move(array));
  } else if (value.is_none()) {
    raise_config(key + ": None is no config value; leave the key out to keep its default");
  } else {
    raise_config(key + ": a " + type_name(value) +
                 " is no config value; use a bool, int, float, str, list or dict");
  }
}

toml::table to_table(const py::dict& dict, const std::string& prefix) {
  toml::table table;
  for (const auto& [k, v] : dict) {
    const std::string key = key_string(k, prefix.empty() ? "config" : prefix);
    toml::array box;  // the node is made in a one-element array, then moved over
    append_node(v, joined(prefix, key), box);
    box.get(0)->visit([&](auto& node) { table.insert_or_assign(key, std::move(node)); });
  }
  return table;
}

// `value` as the text of one TOML value, for a `--set` override.
std::string value_text(const py::handle& value, const std::string& key) {
  if (py::isinstance<py::bool_>(value)) return value.cast<bool>() ? "true" : "false";
  if (py::isinstance<py::int_>(value)) return std::to_string(to_int64(value, key));
  if (py::isinstance<py::float_>(value)) {
    const double d = value.cast<double>();
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
    return py::repr(value).cast<std::string>();  // the shortest text that reads back the same
  }
  if (py::isinstance<py::str>(value)) return host::toml_quote(value.cast<std::string>());
  if (is_pathlike(value)) return host::toml_quote(fspath(value));
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    std::string out = "[";
    size_t i = 0;
    for (const py::handle element : value) {
      out += (i ? ", " : "") + value_text(element, key + "[" + std::to_string(i) + "]");
      ++i;
    }
    return out + "]";
  }
  if (value.is_none())
    raise_config(key + ": None is no config value; leave the override out to keep the config's");
  raise_config(key + ": a " + type_name(value) +
               " is no config value; use a bool, int, float, str, list or dict");
}

void add_overrides(const std::string& key, const py::handle& value, std::vector<std::string>& out) {
  if (py::isinstance<py::dict>(value)) {
    for (const auto& [k, v] : value.cast<py::dict>())
      add_overrides(joined(key, key_string(k, key)), v, out);
    return;
  }
  out.push_back(key + "=" + value_text(value, key));
}

// "budgets__max_items_per_batch" -> "budgets.max_items_per_batch": dotted
// keys cannot be Python keyword names.
std::string dotted(const std::string& key) {
  std::string out;  // built anew: GCC 12's -Wrestrict misfires on string::replace
  for (size_t k = 0; k < key.size(); ++k) {
    if (key[k] == '_' && k + 1 < key.size() && key[k + 1] == '_') {
      out.push_back('.');
      ++k;
    } else {
      out.push_back(key[k]);
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> overrides_from_kwargs(const py::dict& kwargs) {
  std::vector<std::string> out;
  for (const auto& [k, v] : kwargs) add_overrides(dotted(key_string(k, "overrides")), v, out);
  return out;
}

host::HostConfig load_python_config(const py::object& config,
                                    const std::vector<std::string>& overrides) {
  // The caller supplies the items (encode), so the config's synthetic
  // workload bounds are not held against it, as for `encgraph encode FILES`.
  host::ConfigUse use;
  use.workload_replaced = true;
  if (config.is_none()) return host::load_config_text("", "overrides", overrides, use);
  if (py::isinstance<py::str>(config) || is_pathlike(config)) {
    const std::string path =
        py::isinstance<py::str>(config) ? config.cast<std::string>() : fspath(config);
    py::gil_scoped_release release;
    return host::load_config(path, overrides, use);
  }
  if (py::isinstance<py::dict>(config)) {
    std::ostringstream text;
    text << to_table(config.cast<py::dict>(), "");
    return host::load_config_text(text.str(), "config dict", overrides, use);
  }
  throw py::type_error("config must be a path (str or os.PathLike), a dict or None, not " +
                       type_name(config));
}

}  // namespace encgraph::python
