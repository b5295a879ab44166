// The OpenBLAS kernel choice made before plugins load (blas_kernels.hpp).
#include <encgraph/blas_kernels.hpp>

#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

using encgraph::blas_coretype_for;
using encgraph::CpuFeatures;

namespace {
std::string str(const char* s) {
  return s ? s : "(none)";
}
}  // namespace

TEST_CASE("Intel CPUs get the widest kernels their instruction sets allow") {
  CHECK(str(blas_coretype_for({true, true, true})) == "SkylakeX");
  CHECK(str(blas_coretype_for({true, false, true})) == "Haswell");
  CHECK(str(blas_coretype_for({true, false, false})) == "(none)");
}

TEST_CASE("other vendors keep OpenBLAS's own choice") {
  CHECK(str(blas_coretype_for({false, true, true})) == "(none)");
  CHECK(str(blas_coretype_for({false, false, true})) == "(none)");
}

TEST_CASE("unset, it is chosen from this CPU; set, the user's value stands") {
  // Each case in a child process: the choice is made once per process.
  auto in_child = [](const char* preset) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      if (preset)
        setenv("OPENBLAS_CORETYPE", preset, 1);
      else
        unsetenv("OPENBLAS_CORETYPE");
      const std::string want = preset ? preset : str(blas_coretype_for(encgraph::cpu_features()));
      const std::string got = str(encgraph::choose_blas_kernels());
      const char* env = std::getenv("OPENBLAS_CORETYPE");
      const bool ok = got == want && str(env) == want;
      _exit(ok ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
  };
  CHECK(in_child(nullptr) == 0);
  CHECK(in_child("Prescott") == 0);
  CHECK(in_child("Haswell") == 0);
}
