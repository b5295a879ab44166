// `encgraph plugins`: lists every plugin found on the search path with its
// name, version, ABI, modalities, devices and file, then the rejected files
// with their reasons. Each candidate is inspected in a probe process, so a bad
// file in a plugin folder is listed, never fatal.
#include "commands.hpp"

#include <encgraph/plugin_loader.hpp>

#include <boost/program_options.hpp>

#include <iostream>

namespace po = boost::program_options;

namespace encgraph::host {

int plugins_command(const std::vector<std::string>& args) {
  po::options_description opts("encgraph plugins [--plugin-dir DIR]...");
  opts.add_options()("help,h", "show this help")(
      "plugin-dir", po::value<std::vector<std::string>>()->composing(),
      "directory searched before ENCGRAPH_PLUGIN_PATH and the default folders (repeatable)");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(opts).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "encgraph plugins: " << e.what() << "\n" << opts;
    return kExitUsage;
  }
  if (vm.count("help")) {
    std::cout << opts;
    return kExitOk;
  }
  std::vector<std::filesystem::path> dirs;
  if (vm.count("plugin-dir"))
    for (const auto& d : vm["plugin-dir"].as<std::vector<std::string>>()) dirs.emplace_back(d);
  const PluginRegistry registry(dirs);
  const PluginSurvey survey = registry.survey();

  std::cout << "search path:\n";
  for (const auto& d : registry.search_path()) std::cout << "  " << d.string() << "\n";
  std::cout << "plugins (" << survey.plugins.size() << "):\n";
  for (const auto& p : survey.plugins)
    std::cout << "  " << p.name << "  version " << p.version << "  abi " << p.abi_major << "."
              << p.abi_minor << "  modalities " << modality_names(p.modalities) << "  devices "
              << device_names(p.devices) << "  " << p.file.string() << "\n";
  if (!survey.rejected.empty()) {
    std::cout << "rejected (" << survey.rejected.size() << "):\n";
    for (const auto& r : survey.rejected)
      std::cout << "  " << r.file.string() << ": " << r.reason << "\n";
  }
  return kExitOk;
}

}  // namespace encgraph::host
