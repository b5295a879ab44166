// Output files: what may be a target (absent or a regular file, in a writable
// folder), outputs never being inputs or each other (links, ./x, folders),
// staging beside the target with an atomic rename, and staging files removed
// on error and on SIGINT/SIGTERM.
#include "host_test_support.hpp"
#include "output_files.hpp"

#include <doctest/doctest.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <iterator>

using namespace encgraph::host;
namespace fs = std::filesystem;

using host_test::names;
using host_test::read_all;

namespace {

std::string refusal(const std::function<void()>& f) {
  try {
    f();
  } catch (const encgraph::Error& e) {
    CHECK(e.kind() == encgraph::ErrorKind::Input);
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("an output target must be absent or a regular file; others are refused untouched") {
  host_test::TempDir dir;
  CHECK_NOTHROW(check_output_target({"report", dir / "new" / "deeper" / "r.json"}));
  dir.write("old.json", "{}");
  CHECK_NOTHROW(check_output_target({"report", dir / "old.json"}));

  fs::create_directories(dir / "folder");
  CHECK(refusal([&] {
          check_output_target({"report", dir / "folder"});
        }).find("report '" + (dir / "folder").string() + "' is a directory, not a regular file") ==
        0);
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
  CHECK(refusal([&] {
          check_output_target({"report", dir / "fifo"});
        }).find("is a FIFO (named pipe), not a regular file") != std::string::npos);
  CHECK(refusal([&] {
          check_output_target({"report", "/dev/null"});
        }).find("'/dev/null' is a character device") != std::string::npos);
  // A symlink to a device is the device.
  fs::create_symlink("/dev/null", dir / "null-link");
  CHECK(refusal([&] {
          check_output_target({"report", dir / "null-link"});
        }).find("is a character device") != std::string::npos);
  // A parent that is a file.
  CHECK(refusal([&] {
          check_output_target({"report", dir / "old.json" / "r.json"});
        }).find("' is a regular file, not a folder") != std::string::npos);
  CHECK(read_all(dir / "old.json") == "{}");
  CHECK(fs::is_fifo(dir / "fifo"));
  CHECK(fs::is_empty(dir / "folder"));
}

TEST_CASE("an output that is an input, through any path, is refused") {
  host_test::TempDir dir;
  const fs::path image = dir.write("a.png", "pixels");
  fs::create_symlink(image, dir / "sym.png");
  fs::create_hard_link(image, dir / "hard.png");
  const std::vector<NamedFile> inputs = {{"config", dir.write("c.toml", "")}, {"image", image}};
  for (const fs::path& out : {image, dir / "sym.png", dir / "hard.png", dir / "." / "a.png",
                              dir / "sub" / ".." / "a.png"}) {
    CAPTURE(out);
    if (out.string().find("sub") != std::string::npos) fs::create_directories(dir / "sub");
    CHECK(refusal([&] {
            check_outputs_distinct({{"embeddings output", out}}, inputs);
          })
              .find("is the image '" + image.string() +
                    "' (the same file): writing it would destroy that input") != std::string::npos);
  }
  CHECK(refusal([&] {
          check_outputs_distinct({{"report", dir / "c.toml"}}, inputs);
        }).find("the report '" + (dir / "c.toml").string() + "' is the config") == 0);
  // Two outputs that do not exist yet, spelled differently.
  const fs::path cwd = fs::current_path();
  fs::current_path(dir.path());
  const std::string both = refusal([&] {
    check_outputs_distinct({{"embeddings output", "x"}, {"report", "./x"}}, {});
  });
  fs::current_path(cwd);
  CHECK(both.find("the embeddings output 'x' and the report './x' are the same file") == 0);
  // An existing file inside an input folder (a weights folder) is part of it.
  fs::create_directories(dir / "weights");
  const fs::path shard = dir.write("weights/model.safetensors", "w");
  CHECK(refusal([&] {
          check_outputs_distinct({{"embeddings output", shard}},
                                 {{"weights (plugin.weights)", dir / "weights"}});
        }).find("lies inside the weights (plugin.weights)") != std::string::npos);
  // Distinct files pass; a new file in an input folder is not one of its files.
  CHECK_NOTHROW(check_outputs_distinct(
      {{"embeddings output", dir / "e.safetensors"}, {"report", dir / "r.json"}}, inputs));
  CHECK_NOTHROW(check_outputs_distinct({{"embeddings output", dir / "weights" / "new"}},
                                       {{"weights", dir / "weights"}}));
}

TEST_CASE("a staged file replaces its target only on commit, under a unique staging name") {
  host_test::TempDir dir;
  const fs::path target = dir.write("out.json", "old");
  ::chmod(target.c_str(), 0640);
  const size_t registered = registered_staging_files();
  {
    StagedFile a(target, "report"), b(target, "report");
    CHECK(a.staging_path() != b.staging_path());
    CHECK(a.staging_path().parent_path() == target.parent_path());
    CHECK(registered_staging_files() == registered + 2);
    a.write("from a", 6);
    b.write("from b, longer", 14);
    a.commit();
    CHECK(read_all(target) == "from a");
    CHECK(fs::exists(b.staging_path()));
  }  // b abandoned: its staging file goes, the target stays a's
  CHECK(read_all(target) == "from a");
  CHECK(names(dir.path()) == std::vector<std::string>{"out.json"});
  CHECK(registered_staging_files() == registered);
  // The existing file's permissions are kept.
  CHECK((fs::status(target).permissions() & fs::perms::all) ==
        (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read));
}

TEST_CASE("through a symlink the linked file is replaced; appended staging bytes are copied") {
  host_test::TempDir dir;
  fs::create_directories(dir / "real");
  const fs::path real = dir.write("real/e.bin", "old");
  fs::create_symlink(real, dir / "link.bin");
  StagedFile data(dir / "link.bin", "embeddings file");
  std::string big(3 << 20, 'x');  // more than one copy chunk
  big[12345] = 'y';
  data.write(big.data(), big.size());
  StagedFile out(dir / "link.bin", "embeddings file");
  out.write("head", 4);
  out.append(data, big.size());
  CHECK(out.size() == 4 + big.size());
  out.commit();
  data.discard();
  CHECK(fs::is_symlink(dir / "link.bin"));
  CHECK(read_all(real) == "head" + big);
  CHECK(names(dir / "real") == std::vector<std::string>{"e.bin"});
}

TEST_CASE("a target that became a folder during the run is not replaced") {
  host_test::TempDir dir;
  StagedFile f(dir / "r.json", "report");
  f.write("x", 1);
  fs::create_directories(dir / "r.json");
  CHECK(refusal([&] { f.commit(); }).find("became a directory during the run") !=
        std::string::npos);
  CHECK(fs::is_directory(dir / "r.json"));
  CHECK(names(dir.path()) == std::vector<std::string>{"r.json"});
}

TEST_CASE("SIGINT and SIGTERM remove the staging files, and the process still dies of them") {
  for (int sig : {SIGINT, SIGTERM}) {
    CAPTURE(sig);
    host_test::TempDir dir;
    dir.write("e.safetensors", "good old file");
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      // The default disposition, as in the encgraph process (not the test
      // framework's handler, which would report the signal as a failure).
      ::signal(sig, SIG_DFL);
      StagedFile a(dir / "e.safetensors", "embeddings file");
      StagedFile b(dir / "r.json", "report");
      a.write("partial", 7);
      ::raise(sig);
      ::_exit(0);  // not reached
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == sig);
    CHECK(names(dir.path()) == std::vector<std::string>{"e.safetensors"});
    CHECK(read_all(dir / "e.safetensors") == "good old file");
  }
}

TEST_CASE("a target naming a folder is refused even before the folder exists") {
  host_test::TempDir dir;
  for (const char* name : {"new/", "new/.", "new/.."}) {
    CAPTURE(name);
    CHECK(refusal([&] {
            check_output_target({"embeddings output", dir / name});
          }).find("names a folder, not a file") != std::string::npos);
  }
  CHECK(names(dir.path()).empty());
}

TEST_CASE("folders made for an output are removed when it is not committed, kept when it is") {
  host_test::TempDir dir;
  {
    StagedFile f(dir / "a" / "b" / "e.st", "embeddings file");
    f.write("x", 1);
    CHECK(fs::is_directory(dir / "a" / "b"));
  }  // abandoned
  CHECK(names(dir.path()).empty());
  {
    StagedFile data(dir / "a" / "b" / "e.st", "embeddings file");
    StagedFile out(dir / "a" / "b" / "e.st", "embeddings file");
    out.write("y", 1);
    out.commit();
  }  // data's folders now hold the committed file
  CHECK(read_all(dir / "a" / "b" / "e.st") == "y");
  // A folder that existed before is never removed.
  fs::create_directories(dir / "kept");
  { StagedFile f(dir / "kept" / "r.json", "report"); }
  CHECK(fs::is_directory(dir / "kept"));
}

TEST_CASE("a dangling symlink is written through, never replaced by a file") {
  host_test::TempDir dir;
  fs::create_symlink("real/e.st", dir / "link.st");
  StagedFile f(dir / "link.st", "embeddings file");
  f.write("z", 1);
  f.commit();
  CHECK(fs::is_symlink(dir / "link.st"));
  CHECK(read_all(dir / "real" / "e.st") == "z");
  // Two outputs meeting through a dangling link are one file.
  fs::create_symlink("r.json", dir / "to-report");
  CHECK(refusal([&] {
          check_outputs_distinct(
              {{"embeddings output", dir / "to-report"}, {"report", dir / "r.json"}}, {});
        }).find("are the same file") != std::string::npos);
}

TEST_CASE("a file-size limit fails the write with the file's name (kind Device), no signal") {
  host_test::TempDir dir;
  dir.write("e.st", "good");
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::signal(SIGXFSZ, SIG_DFL);
    const struct rlimit limit = {4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    int code = 3;
    try {
      StagedFile f(dir / "e.st", "embeddings file");
      const std::string block(8192, 'x');
      f.write(block.data(), block.size());
    } catch (const encgraph::Error& e) {
      const std::string m = e.what();
      code = e.kind() == encgraph::ErrorKind::Device &&
                     m.find("embeddings file '" + (dir / "e.st").string() +
                            "' cannot be written: File too large") == 0 &&
                     m.find("ulimit -f") != std::string::npos
                 ? 0
                 : 4;
    }
    ::_exit(code);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(names(dir.path()) == std::vector<std::string>{"e.st"});
  CHECK(read_all(dir / "e.st") == "good");
}

TEST_CASE("a signal also removes the folders made for the staging files") {
  host_test::TempDir dir;
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::signal(SIGTERM, SIG_DFL);
    ::signal(SIGUSR1, SIG_DFL);
    StagedFile a(dir / "x" / "y" / "e.st", "embeddings file");
    StagedFile b(dir / "x" / "r.json", "report");
    a.write("partial", 7);
    // SIGUSR1 is taken over only where its disposition is the default.
    ::raise(SIGUSR1);
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGUSR1);
  CHECK(names(dir.path()).empty());
}

TEST_CASE("an output inside another output, or under a dangling folder link, is refused early") {
  host_test::TempDir dir;
  CHECK(refusal([&] {
          check_outputs_distinct(
              {{"embeddings output", dir / "out"}, {"report", dir / "out" / "r.json"}}, {});
        })
            .find("the report '" + (dir / "out" / "r.json").string() +
                  "' lies inside the embeddings output") == 0);
  fs::create_symlink("nowhere", dir / "dl");
  CHECK(refusal([&] {
          check_output_target({"report", dir / "dl" / "sub" / "r.json"});
        })
            .find("its folder '" + (dir / "dl").string() +
                  "' is a symlink to 'nowhere', which does not exist") != std::string::npos);
  CHECK(names(dir.path()) == std::vector<std::string>{"dl"});
}

TEST_CASE("an existing output made read-only is kept, not replaced") {
  host_test::TempDir dir;
  const fs::path kept = dir.write("kept.st", "precious");
  ::chmod(kept.c_str(), 0444);
  ::chmod(dir.path().c_str(), 0777);  // the folder would let a rename replace it
  // Root may write anything: the check is made as an ordinary user then.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(5);
    std::string m;
    try {
      check_output_target({"embeddings output", kept});
    } catch (const encgraph::Error& e) {
      m = e.what();
    }
    ::_exit(m.find("is read-only (its permissions forbid writing it)") != std::string::npos ? 0
                                                                                            : 4);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(read_all(kept) == "precious");
}
