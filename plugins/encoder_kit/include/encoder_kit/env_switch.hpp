// On/off switches read from the environment: the A/B switches of the
// benchmarks (ENCGRAPH_PDL, ENCGRAPH_ATTENTION_TMA, ...), on by default.
#pragma once

namespace encoder_kit {

// False only when the variable is set to exactly "0": unset, empty or any other
// value leaves the default, on. Callers read it once (a function-local static)
// so a run never switches halfway.
bool env_switch_on(const char* name);

}  // namespace encoder_kit
