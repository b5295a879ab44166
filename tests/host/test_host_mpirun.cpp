// Multi-process data parallelism on CPU ranks, through the real launcher:
// `mpirun -np 2 encgraph encode` of image files (PNG, JPEG) and a video file
// writes the same embeddings as one process, item for item (at a tolerance:
// the ranks batch the items differently); a rank failing on a corrupt file,
// a rank killed mid-run and a rank stopped mid-run each end the whole job
// with a non-zero exit, a message naming what failed, and no output written;
// an environment launch of CPU ranks and mpirun with runtime.data_parallel
// are refused with the fix. Skipped when encgraph was built without MPI.
#include "host_test_support.hpp"
#include "safetensors_reader.hpp"
#include "test_video_writer.hpp"

#include <doctest/doctest.h>
#include <stb/stb_image_write.h>

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <thread>

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

bool mpi_built() {
#ifdef EG_HOST_HAVE_MPI
  return true;
#else
  return false;
#endif
}

// LeakSanitizer off in the ranks (the sanitizer build; no effect elsewhere):
// Open MPI keeps allocations past MPI_Finalize, many in MCA components it has
// unloaded by then, whose frames no suppression can name. AddressSanitizer and
// UBSan still check every rank.
const char* kMpirun =
    "mpirun --allow-run-as-root --oversubscribe -x LSAN_OPTIONS=detect_leaks=0 -np 2 ";

std::string quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// A shell command started in the background, its output in a file.
struct Job {
  pid_t pid = -1;
  fs::path log;
  int code = -1;
  double seconds = 0.0;

  // Waits up to `limit` seconds; false (after killing its process group) when
  // it is still running then.
  bool wait(double limit) {
    const auto start = Clock::now();
    for (;;) {
      int status = 0;
      const pid_t r = waitpid(pid, &status, WNOHANG);
      if (r == pid) {
        code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        seconds = std::chrono::duration<double>(Clock::now() - start).count();
        return true;
      }
      if (std::chrono::duration<double>(Clock::now() - start).count() > limit) {
        kill(-pid, SIGKILL);
        waitpid(pid, &status, 0);
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  std::string output() const { return host_test::read_all(log); }
};

Job start(const std::string& command, const fs::path& log) {
  Job job;
  job.log = log;
  job.pid = fork();
  REQUIRE(job.pid >= 0);
  if (job.pid == 0) {
    setpgid(0, 0);  // its own group: a hung job is killed whole
    const std::string line = command + " > " + quoted(log.string()) + " 2>&1";
    execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  setpgid(job.pid, job.pid);
  return job;
}

// The encgraph processes mpirun started for a job (children of its shell's
// mpirun): found by their command line, which holds the job's unique folder.
std::vector<pid_t> ranks_of(const fs::path& folder) {
  std::vector<pid_t> pids;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    std::ifstream in(entry.path() / "cmdline", std::ios::binary);
    std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (cmd.rfind(EG_HOST_ENCGRAPH, 0) == 0 && cmd.find(folder.string()) != std::string::npos)
      pids.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return pids;
}

struct Scratch {
  fs::path dir;
  Scratch() {
    dir = fs::temp_directory_path() / ("eg-mpirun-" + std::to_string(getpid()) + "-" +
                                       std::to_string(Clock::now().time_since_epoch().count()));
    fs::create_directories(dir);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

// Smooth RGB values, different per image.
std::vector<uint8_t> pixels(int w, int h, int seed) {
  std::vector<uint8_t> px(static_cast<size_t>(w * h * 3));
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c)
        px[static_cast<size_t>((y * w + x) * 3 + c)] =
            static_cast<uint8_t>((x * 7 + y * 3 + c * 40 + seed * 29) % 256);
  return px;
}

// PNG and JPEG images of several sizes and a lossless Matroska video.
std::vector<std::string> write_media(const fs::path& dir) {
  std::vector<std::string> files;
  const int sizes[][2] = {{56, 84}, {112, 56}, {140, 140}, {84, 196}, {56, 56}, {168, 112}};
  int seed = 0;
  for (const auto& s : sizes) {
    const auto px = pixels(s[0], s[1], seed);
    const bool jpeg = seed % 3 == 2;
    const fs::path path = dir / ("img" + std::to_string(seed) + (jpeg ? ".jpg" : ".png"));
    const int ok = jpeg ? stbi_write_jpg(path.c_str(), s[0], s[1], 3, px.data(), 90)
                        : stbi_write_png(path.c_str(), s[0], s[1], 3, px.data(), s[0] * 3);
    REQUIRE(ok != 0);
    files.push_back(path.string());
    ++seed;
  }
  const host_test::Clip lossless{"matroska", "ffv1", AV_PIX_FMT_0RGB32};
  const fs::path video = dir / "clip.mkv";
  REQUIRE(host_test::write_video(video, lossless, host_test::source_frames(8, 56, 56), 56, 56));
  files.push_back(video.string());
  return files;
}

std::string encode_line(const fs::path& config, const std::vector<std::string>& files,
                        const fs::path& out, const std::string& extra = "") {
  // Appended piece by piece: GCC 12 warns (-Wrestrict, falsely) on a chain of
  // `const char* + std::string&&`.
  std::string line = EG_HOST_ENCGRAPH;
  line += " encode --config ";
  line += quoted(config.string());
  line += " --set ";
  line += quoted("runtime.plugin_dirs=[\"" EG_HOST_PLUGIN_DIR "\"]");
  line += " -o ";
  line += quoted(out.string());
  line += extra;
  for (const auto& f : files) {
    line += ' ';
    line += quoted(f);
  }
  return line;
}

const fs::path kQwenCpu = fs::path(EG_HOST_SOURCE_DIR) / "configs" / "qwen2_5_vl_small_cpu.toml";

}  // namespace

TEST_CASE("mpirun -np 2 encodes images and a video as one process does, item for item") {
  if (!mpi_built()) {
    MESSAGE("skipped: encgraph was built without MPI (apt-get install libopenmpi-dev)");
    return;
  }
  Scratch s;
  const auto files = write_media(s.dir);
  Job single = start(encode_line(kQwenCpu, files, s.dir / "single.safetensors"), s.dir / "1.log");
  REQUIRE(single.wait(120));
  INFO(single.output());
  REQUIRE(single.code == 0);
  Job multi = start(std::string(kMpirun) + "-x ENCGRAPH_PLUGIN_PATH " +
                        encode_line(kQwenCpu, files, s.dir / "multi.safetensors",
                                    " --report " + quoted((s.dir / "report.json").string())),
                    s.dir / "2.log");
  REQUIRE(multi.wait(120));
  INFO(multi.output());
  REQUIRE(multi.code == 0);
  CHECK(multi.output().find("joined a job of 2 processes started by mpirun") != std::string::npos);

  const auto a = host_test::read_safetensors(s.dir / "single.safetensors");
  const auto b = host_test::read_safetensors(s.dir / "multi.safetensors");
  size_t items = 0;
  for (const auto& [name, ta] : a.header.items()) {
    if (name == "__metadata__") continue;
    INFO("item " << name);
    ++items;
    REQUIRE(b.header.contains(name));
    REQUIRE(ta.at("shape") == b.header.at(name).at("shape"));
    REQUIRE(ta.at("dtype") == "F32");
    const std::vector<float> va = a.floats(name), vb = b.floats(name);
    REQUIRE(va.size() == vb.size());
    REQUIRE(!va.empty());
    double scale = 0.0, diff = 0.0;
    for (size_t i = 0; i < va.size(); ++i) {
      REQUIRE(std::isfinite(vb[i]));
      scale = std::max(scale, std::abs(static_cast<double>(va[i])));
      diff = std::max(diff, std::abs(static_cast<double>(va[i]) - vb[i]));
    }
    CHECK(scale > 0.0);
    CHECK(diff <= 1e-4 * std::max(scale, 1.0));
  }
  CHECK(items == files.size());
  CHECK(b.header.size() == a.header.size());
  // Rank 0's report names both ranks.
  const std::string report = host_test::read_all(s.dir / "report.json");
  CHECK(report.find("\"world_size\": 2") != std::string::npos);
}

TEST_CASE("a rank failing on a corrupt file ends every rank, naming the rank and the file") {
  if (!mpi_built()) return;
  Scratch s;
  auto files = write_media(s.dir);
  // A valid PNG header and size, garbage after: it probes well and fails to
  // decode on whichever rank makes it.
  std::string png = host_test::read_all(files[0]);
  for (size_t i = 60; i < png.size(); ++i) png[i] = static_cast<char>(png[i] ^ 0x5a);
  std::ofstream(s.dir / "broken.png", std::ios::binary) << png;
  files.push_back((s.dir / "broken.png").string());
  const fs::path out = s.dir / "out.safetensors";
  Job job = start(std::string(kMpirun) + encode_line(kQwenCpu, files, out), s.dir / "job.log");
  REQUIRE(job.wait(120));
  const std::string log = job.output();
  INFO(log);
  CHECK(job.code == 2);  // a bad input, on every rank: the failing one's kind travels
  CHECK(log.find("broken.png") != std::string::npos);
  CHECK(log.find("failed: ") != std::string::npos);  // the other rank: "rank N failed: ..."
  CHECK_FALSE(fs::exists(out));
}

TEST_CASE("a rank killed mid-run ends the job: no hang, no output") {
  if (!mpi_built()) return;
  Scratch s;
  const fs::path out = s.dir / "out.safetensors";
  const std::string line = std::string(kMpirun) + EG_HOST_ENCGRAPH + " run --config " +
                           quoted(kQwenCpu.string()) + " --set " +
                           quoted("runtime.plugin_dirs=[\"" EG_HOST_PLUGIN_DIR "\"]") +
                           " --set workload.count=4000 --set distributed.timeout_s=20" +
                           " --embeddings " + quoted(out.string());
  Job job = start(line, s.dir / "job.log");
  // Once both ranks run (their command lines hold the scratch folder), kill one.
  std::vector<pid_t> ranks;
  for (int i = 0; i < 400 && ranks.size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ranks = ranks_of(s.dir);
  }
  REQUIRE(ranks.size() == 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // into the run
  kill(std::max(ranks[0], ranks[1]), SIGKILL);
  REQUIRE(job.wait(60));
  const std::string log = job.output();
  INFO(log);
  CHECK(job.code != 0);
  CHECK(log.find("signal 9") != std::string::npos);  // mpirun names the killed process
  CHECK_FALSE(fs::exists(out));
  CHECK(ranks_of(s.dir).empty());
}

TEST_CASE("a rank that stops answering times out the job, named, within the timeout") {
  if (!mpi_built()) return;
  Scratch s;
  const std::string line = std::string(kMpirun) + EG_HOST_ENCGRAPH + " run --config " +
                           quoted(kQwenCpu.string()) + " --set " +
                           quoted("runtime.plugin_dirs=[\"" EG_HOST_PLUGIN_DIR "\"]") +
                           " --set workload.count=4000 --set distributed.timeout_s=3" +
                           " --report " + quoted((s.dir / "r.json").string());
  Job job = start(line, s.dir / "job.log");
  std::vector<pid_t> ranks;
  for (int i = 0; i < 400 && ranks.size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ranks = ranks_of(s.dir);
  }
  REQUIRE(ranks.size() == 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const pid_t stopped = std::max(ranks[0], ranks[1]);
  kill(stopped, SIGSTOP);  // alive but silent: only the timeout can tell
  const bool ended = job.wait(60);
  kill(stopped, SIGKILL);
  REQUIRE(ended);
  const std::string log = job.output();
  INFO(log);
  CHECK(job.code != 0);
  CHECK(log.find("did not answer within 3 s") != std::string::npos);
  CHECK(log.find("distributed.timeout_s") != std::string::npos);
  CHECK_FALSE(fs::exists(s.dir / "r.json"));
}

TEST_CASE("CPU ranks from RANK/WORLD_SIZE and mpirun with runtime.data_parallel are refused") {
  if (!mpi_built()) return;
  Scratch s;
  const std::string base = std::string(EG_HOST_ENCGRAPH) + " run --config " +
                           quoted(kQwenCpu.string()) + " --set " +
                           quoted("runtime.plugin_dirs=[\"" EG_HOST_PLUGIN_DIR "\"]") + " --set " +
                           quoted("distributed.id_file=\"" + (s.dir / "id").string() + "\"") +
                           " --set distributed.timeout_s=20";
  Job r0 = start("RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 " + base, s.dir / "r0.log");
  Job r1 = start("RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 " + base, s.dir / "r1.log");
  REQUIRE(r0.wait(60));
  REQUIRE(r1.wait(60));
  for (const Job* j : {&r0, &r1}) {
    INFO(j->output());
    CHECK(j->code == 2);
    CHECK(j->seconds < 15.0);  // refused at once, not after a timeout
    CHECK(j->output().find("Start CPU ranks with mpirun") != std::string::npos);
  }
  Job dp =
      start(std::string(kMpirun) + EG_HOST_ENCGRAPH + " run --config " + quoted(kQwenCpu.string()) +
                " --set " + quoted("runtime.plugin_dirs=[\"" EG_HOST_PLUGIN_DIR "\"]") +
                " --set runtime.device=\"auto\"" + " --set " +
                quoted("runtime.data_parallel=[\"cpu\",\"cpu\"]"),
            s.dir / "dp.log");
  REQUIRE(dp.wait(60));
  INFO(dp.output());
  CHECK(dp.code == 2);
  CHECK(dp.output().find("cannot be combined with a multi-process launch") != std::string::npos);
}

TEST_CASE("runtime.distributed keys are checked, and launch = \"mpi\" needs mpirun") {
  CHECK(host_test::config_error(host_test::toy_config(), {"distributed.launch=\"slurm\""})
            .find("distributed.launch") != std::string::npos);
  CHECK(host_test::config_error(host_test::toy_config(), {"distributed.timeout_s=0"})
            .find("distributed.timeout_s") != std::string::npos);
  CHECK(host_test::config_error(host_test::toy_config(), {"distributed.timeout_s=-3"})
            .find("positive number of seconds") != std::string::npos);
  encgraph::DistributedConfig config;
  config.launch = "mpi";
  if (std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr) {
    try {
      encgraph::detect_launch(config);
      FAIL("launch = \"mpi\" outside mpirun was accepted");
    } catch (const encgraph::Error& e) {
      CHECK(e.kind() == encgraph::ErrorKind::Config);
      CHECK(std::string(e.what()).find("mpirun -np N") != std::string::npos);
    }
  }
  config.launch = "off";
  CHECK(encgraph::detect_launch(config).empty());
}
