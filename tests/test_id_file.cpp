// The id file of an environment launch (core/src/process_group/id_file.*):
// rank 0 publishes its NCCL id, the other ranks wait for a file of their job.
#include "process_group/id_file.hpp"

#include <encgraph/error.hpp>
#include <encgraph/process_group.hpp>

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace encgraph;
namespace fs = std::filesystem;

namespace {

// A fresh folder under the system's temporary folder, removed afterwards.
struct Scratch {
  fs::path dir;
  Scratch() {
    std::string tmpl = (fs::temp_directory_path() / "encgraph-id-file-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    dir = tmpl;
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string path(const std::string& name) const { return (dir / name).string(); }
  std::set<std::string> names() const {
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
    return out;
  }
};

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  REQUIRE(out.good());
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// 128 bytes like an NCCL id, with NUL, newline and high bytes.
std::string sample_id(unsigned char seed = 0) {
  std::string id;
  for (int i = 0; i < 128; ++i) id += static_cast<char>((i * 37 + seed) & 0xff);
  return id;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double now_epoch() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The GroupTimeout message of a wait, checking that it came after about
// `timeout_s` (not sooner, not much later); "" when the wait returned.
std::string timeout_of(const std::string& path, const std::string& job, int world, double timeout_s,
                       double not_before = 0.0) {
  const auto t0 = std::chrono::steady_clock::now();
  try {
    wait_id_file(path, job, world, timeout_s, 1, not_before);
  } catch (const GroupTimeout& e) {
    const double took = seconds_since(t0);
    CHECK(took >= timeout_s);
    CHECK(took < timeout_s + 1.5);
    CHECK(e.kind() == ErrorKind::Device);
    return e.what();
  }
  return "";
}

// Runs `fn` on a thread. If it has not returned within `limit_s` (blocked
// opening the FIFO `fifo`), opens the FIFO for writing to release it, so that
// a hang fails the test instead of stalling it. True when it returned in time.
bool returns_within(double limit_s, const std::string& fifo, const std::function<void()>& fn) {
  std::promise<void> done;
  std::future<void> finished = done.get_future();
  std::thread worker([&] {
    fn();
    done.set_value();
  });
  const bool in_time =
      finished.wait_for(std::chrono::duration<double>(limit_s)) == std::future_status::ready;
  if (!in_time) {
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
  }
  worker.join();
  return in_time;
}

const std::string kHint =
    "(distributed.job_id or ENCGRAPH_JOB_ID / SLURM_JOB_ID)";  // the timeout's fix

}  // namespace

TEST_CASE("publish then wait returns the id; the folder holds only the file") {
  Scratch s;
  const std::string path = s.path("nccl.id");
  const std::string id = sample_id();
  publish_id_file(path, "job-7", 4, id);
  CHECK(s.names() == std::set<std::string>{"nccl.id"});
  CHECK(wait_id_file(path, "job-7", 4, 1.0, 3, 0.0) == id);
  // The file is text: a magic line, the job, the world size, the id in hex.
  const std::string text = read_file(path);
  CHECK(text.rfind("encgraph-nccl-id 1\njob job-7\nworld 4\n", 0) == 0);
  CHECK(text.size() == std::string("encgraph-nccl-id 1\njob job-7\nworld 4\n").size() + 256 + 1);

  // Without a job id, a fresh file is taken.
  publish_id_file(path, "", 2, "x");
  CHECK(wait_id_file(path, "", 2, 1.0, 1, now_epoch() - 60.0) == "x");
  CHECK(s.names() == std::set<std::string>{"nccl.id"});
}

TEST_CASE("publish replaces an earlier job's file") {
  Scratch s;
  const std::string path = s.path("id");
  publish_id_file(path, "old", 2, sample_id(1));
  publish_id_file(path, "new", 2, sample_id(2));
  CHECK(wait_id_file(path, "new", 2, 1.0, 1, 0.0) == sample_id(2));
  CHECK(s.names() == std::set<std::string>{"id"});
}

TEST_CASE("a file that appears during the wait is taken") {
  Scratch s;
  const std::string path = s.path("id");
  std::thread rank0([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    publish_id_file(path, "j", 3, sample_id(5));
  });
  const auto t0 = std::chrono::steady_clock::now();
  std::string got;
  CHECK_NOTHROW(got = wait_id_file(path, "j", 3, 10.0, 2, 0.0));
  rank0.join();
  CHECK(got == sample_id(5));
  CHECK(seconds_since(t0) >= 0.15);
  CHECK(seconds_since(t0) < 5.0);
}

TEST_CASE("a file of another job is not accepted: the wait times out naming it") {
  Scratch s;
  const std::string path = s.path("id");
  publish_id_file(path, "other", 2, sample_id());
  const std::string m = timeout_of(path, "mine", 2, 0.3);
  CHECK(m == "rank 1: rank 0's NCCL id did not appear in distributed.id_file '" + path +
                 "' within 0.3 s (distributed.timeout_s); found the id of job 'other', not of job "
                 "'mine'. Check that rank 0 started, that the path is on a filesystem every rank "
                 "sees, and that every rank has the same job id " +
                 kHint);

  // A file without a job id does not serve a job that has one, nor the reverse.
  publish_id_file(path, "", 2, sample_id());
  CHECK(timeout_of(path, "mine", 2, 0.3).find("found the id of job '', not of job 'mine'") !=
        std::string::npos);
  publish_id_file(path, "mine", 2, sample_id());
  CHECK(timeout_of(path, "", 2, 0.3, 0.0).find("found the id of job 'mine', not of job ''") !=
        std::string::npos);
}

TEST_CASE("a file of this job but another world size is refused at once") {
  Scratch s;
  const std::string path = s.path("id");
  publish_id_file(path, "j", 4, sample_id());
  const auto t0 = std::chrono::steady_clock::now();
  try {
    wait_id_file(path, "j", 2, 30.0, 1, 0.0);
    FAIL("a world-size mismatch was accepted");
  } catch (const GroupTimeout&) {
    FAIL("a world-size mismatch waited for the timeout");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Config);
    CHECK(std::string(e.what()) ==
          "rank 1: distributed.id_file '" + path +
              "' holds the id of a job of 4 ranks, but WORLD_SIZE is 2: every rank must be "
              "started with the same WORLD_SIZE");
  }
  CHECK(seconds_since(t0) < 5.0);  // not the 30 s timeout
}

TEST_CASE("without a job id, a file older than not_before is stale") {
  Scratch s;
  const std::string path = s.path("id");
  publish_id_file(path, "", 2, sample_id());
  const double now = now_epoch();
  const std::string m = timeout_of(path, "", 2, 0.3, now + 100.0);
  CHECK(m.find("found a file older than this process (left by an earlier job?)") !=
        std::string::npos);
  CHECK(wait_id_file(path, "", 2, 0.3, 1, now - 100.0) == sample_id());

  // A file dated back an hour is stale for a process started a minute ago.
  const struct timespec times[2] = {{static_cast<time_t>(now) - 3600, 0},
                                    {static_cast<time_t>(now) - 3600, 0}};
  REQUIRE(utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
  CHECK(timeout_of(path, "", 2, 0.3, now - 60.0).find("a file older than this process") !=
        std::string::npos);

  // With a job id the job names the file: its age does not matter.
  publish_id_file(path, "j", 2, sample_id());
  REQUIRE(utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
  CHECK(wait_id_file(path, "j", 2, 0.3, 1, now + 100.0) == sample_id());
}

TEST_CASE("no file: the wait times out saying so; timeout 0 checks once") {
  Scratch s;
  const std::string path = s.path("absent");
  CHECK(
      timeout_of(path, "j", 2, 0.3).find("within 0.3 s (distributed.timeout_s); found no file.") !=
      std::string::npos);
  CHECK(timeout_of(path, "j", 2, 0.0).find("within 0 s (distributed.timeout_s); found no file.") !=
        std::string::npos);
  // A folder of the path that is a file: nothing can be there.
  write_file(s.path("plain"), "x");
  CHECK(timeout_of(s.path("plain") + "/id", "j", 2, 0.1).find("rank 1: rank 0's NCCL id") == 0);
  CHECK(s.names() == std::set<std::string>{"plain"});
}

TEST_CASE("a directory at the path times out as not a regular file") {
  Scratch s;
  const std::string path = s.path("id");
  fs::create_directory(path);
  CHECK(timeout_of(path, "j", 2, 0.3).find("found not a regular file.") != std::string::npos);
  CHECK(fs::is_directory(path));
}

TEST_CASE("a FIFO at the path times out as not a regular file, without blocking") {
  Scratch s;
  const std::string path = s.path("id");
  REQUIRE(mkfifo(path.c_str(), 0600) == 0);
  std::string m;
  CHECK(returns_within(5.0, path, [&] { m = timeout_of(path, "j", 2, 0.3); }));
  CHECK(m.find("found not a regular file.") != std::string::npos);
  CHECK(s.names() == std::set<std::string>{"id"});
}

TEST_CASE("garbage and truncated files are not id files") {
  Scratch s;
  const std::string path = s.path("id");
  const std::string good =
      "encgraph-nccl-id 1\njob j\nworld 2\n" + std::string(64, 'a') + "0f\n";  // 33 bytes
  write_file(path, good);
  REQUIRE(wait_id_file(path, "j", 2, 0.1, 1, 0.0).size() == 33);

  const std::vector<std::string> bad = {
      "",
      "garbage",
      std::string("\0\xff\x01\n\n\n\n", 7),
      "encgraph-nccl-id 2\njob j\nworld 2\nabcd\n",  // another format version
      "encgraph-nccl-id 1\n",
      "encgraph-nccl-id 1\njob j\n",
      "encgraph-nccl-id 1\njob j\nworld 2\n",
      "encgraph-nccl-id 1\njob j\nworld 2\n\n",      // an empty id
      "encgraph-nccl-id 1\njob j\nworld 2\nabc\n",   // odd hex
      "encgraph-nccl-id 1\njob j\nworld 2\nzz\n",    // not hex
      "encgraph-nccl-id 1\njob j\nworld 2\nABCD\n",  // the writer writes lower case
      "encgraph-nccl-id 1\njob j\nworld two\nabcd\n",
      "encgraph-nccl-id 1\njob j\nworld 99999999999999999999\nabcd\n",
      "encgraph-nccl-id 1\njobj\nworld 2\nabcd\n",
      "encgraph-nccl-id 1\r\njob j\r\nworld 2\r\nabcd\r\n",
  };
  for (const std::string& text : bad) {
    CAPTURE(text);
    write_file(path, text);
    CHECK(timeout_of(path, "j", 2, 0.05).find("found a file that is not an encgraph id file.") !=
          std::string::npos);
  }

  // Every proper prefix of a published file (a copy cut short) is refused:
  // none passes for a shorter id.
  publish_id_file(path, "j", 2, sample_id());
  const std::string full = read_file(path);
  for (size_t n = 0; n < full.size(); ++n) {
    CAPTURE(n);
    write_file(path, full.substr(0, n));
    CHECK(timeout_of(path, "j", 2, 0.0).find("found a file that is not an encgraph id file.") !=
          std::string::npos);
  }
  write_file(path, full);
  CHECK(wait_id_file(path, "j", 2, 0.1, 1, 0.0) == sample_id());

  if (geteuid() != 0) {  // root reads anything
    fs::permissions(path, fs::perms::none);
    CHECK(timeout_of(path, "j", 2, 0.0).find("found a file it cannot read (Permission denied).") !=
          std::string::npos);
    fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write);
  }
}

TEST_CASE("the poll callback runs at every check and its exception propagates") {
  Scratch s;
  const std::string path = s.path("id");
  int calls = 0;
  CHECK_THROWS_AS(wait_id_file(path, "j", 2, 0.3, 1, 0.0, [&] { ++calls; }), GroupTimeout);
  CHECK(calls >= 3);  // a check every 50 ms

  calls = 0;
  try {
    wait_id_file(path, "j", 2, 30.0, 1, 0.0, [&] {
      if (++calls == 3) throw PeerFailure(0, ErrorKind::Input, "rank 0 failed: bad image");
    });
    FAIL("the wait ignored the poll's exception");
  } catch (const PeerFailure& e) {
    CHECK(e.rank() == 0);
    CHECK(e.kind() == ErrorKind::Input);
    CHECK(std::string(e.what()) == "rank 0 failed: bad image");
  }
  CHECK(calls == 3);

  // Polled before the file is read: rank 0's failure wins over its file.
  publish_id_file(path, "j", 2, sample_id());
  calls = 0;
  CHECK_THROWS_AS(wait_id_file(path, "j", 2, 1.0, 1, 0.0,
                               [&] {
                                 ++calls;
                                 throw PeerFailure(0, ErrorKind::Device, "gone");
                               }),
                  PeerFailure);
  CHECK(calls == 1);
  calls = 0;
  CHECK(wait_id_file(path, "j", 2, 1.0, 1, 0.0, [&] { ++calls; }) == sample_id());
  CHECK(calls == 1);
}

TEST_CASE("publish names the file and the fix when its folder cannot take it") {
  Scratch s;
  auto config_error = [](const std::string& path) -> std::string {
    try {
      publish_id_file(path, "j", 2, sample_id());
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Config);
      return e.what();
    }
    return "";
  };
  const std::string missing = s.path("no/such/folder/id");
  CHECK(config_error(missing) == "distributed.id_file = \"" + missing +
                                     "\": cannot create a file in '" + s.path("no/such/folder") +
                                     "' (No such file or directory); name a writable folder "
                                     "every rank sees");
  write_file(s.path("plain"), "x");
  const std::string under_file = s.path("plain") + "/id";
  CHECK(config_error(under_file) ==
        "distributed.id_file = \"" + under_file + "\": cannot create a file in '" +
            s.path("plain") + "' (Not a directory); name a writable folder every rank sees");
  // A folder at the path itself: the rename fails, the temporary file goes.
  fs::create_directory(s.path("taken"));
  fs::create_directory(s.path("taken/sub"));
  CHECK(config_error(s.path("taken")) ==
        "distributed.id_file = \"" + s.path("taken") +
            "\": cannot write it (Is a directory); name a writable file on a filesystem every "
            "rank sees");
  CHECK(s.names() == std::set<std::string>{"plain", "taken"});
  CHECK(read_file(s.path("plain")) == "x");
  if (geteuid() != 0) {  // root writes anywhere
    fs::create_directory(s.path("ro"));
    fs::permissions(s.path("ro"), fs::perms::owner_read | fs::perms::owner_exec);
    CHECK(config_error(s.path("ro/id")).find("(Permission denied)") != std::string::npos);
    fs::permissions(s.path("ro"), fs::perms::owner_all);
    CHECK(fs::is_empty(s.path("ro")));
  }
}

TEST_CASE("remove_id_file removes only a file holding the same id") {
  Scratch s;
  const std::string path = s.path("id");
  publish_id_file(path, "j", 2, sample_id(1));
  remove_id_file(path, sample_id(2));  // a later job's file: kept
  CHECK(fs::exists(path));
  remove_id_file(path, sample_id(1).substr(0, 64));
  CHECK(fs::exists(path));
  remove_id_file(path, sample_id(1));
  CHECK_FALSE(fs::exists(path));
  CHECK_NOTHROW(remove_id_file(path, sample_id(1)));  // already gone

  write_file(path, "garbage");
  remove_id_file(path, sample_id(1));
  CHECK(read_file(path) == "garbage");
  fs::remove(path);

  fs::create_directory(path);
  remove_id_file(path, sample_id(1));
  CHECK(fs::is_directory(path));
  fs::remove(path);

  REQUIRE(mkfifo(path.c_str(), 0600) == 0);
  CHECK(returns_within(5.0, path, [&] { remove_id_file(path, sample_id(1)); }));
  CHECK(fs::is_fifo(path));
  CHECK(s.names() == std::set<std::string>{"id"});
}
