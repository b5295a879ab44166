// What an engine runs, as its callers see it: one plugin instance on one
// device. Items are made and described here; Engine runs them. Runtime is the
// implementation (one plugin instance); a data-parallel engine hands out its
// first rank's, since every rank holds the same plugin and description.
#pragma once

#include <encgraph/plugin_api.h>
#include <encgraph/budget_plan.hpp>
#include <encgraph/item.hpp>
#include <encgraph/output_spec.hpp>

#include <string>
#include <vector>

namespace encgraph {

class Model {
 public:
  virtual ~Model() = default;

  // Decoded pixels or a synthetic geometry in; a plugin item out.
  virtual Item make_item(const eg_item_desc& desc) = 0;
  // The spec make_item(desc).spec() would have, without making the item or
  // reading desc.pixels (the plugin's item_spec_for_desc, ABI 1.2, else a
  // synthetic item's). Fails as make_item would on the geometry.
  virtual eg_item_spec spec_for(const eg_item_desc& desc) = 0;
  // Whether spec_for asks the plugin rather than making a synthetic item.
  virtual bool has_spec_for_desc() const = 0;
  virtual bool supports_modality(eg_modality modality) const = 0;

  virtual const BudgetPlan& plan() const = 0;
  // The plugin's description, normalised: a 1.0 plugin's single output appears
  // as outputs[0] ("embeddings"), every path has a unit.
  virtual const eg_model_info& model_info() const = 0;
  virtual const std::vector<OutputSpec>& outputs() const = 0;
  virtual std::string plugin_name() const = 0;
  virtual std::string plugin_version() const = 0;
  virtual eg_device_type device_type() const = 0;
  virtual std::string device_name() const = 0;
};

}  // namespace encgraph
