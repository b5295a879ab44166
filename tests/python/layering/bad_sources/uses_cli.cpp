// A fixture for test_python_layering_catches_includes: a module source that
// includes a CLI header, which the layering check must name.
#include <cli.hpp>
