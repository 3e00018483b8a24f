#include "test_util.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

namespace plainllama::test {

namespace {

// Each skipped test, with its reason, as a line appended to $PLAINLLAMA_SKIP_LOG ("gtest Suite.Name: reason"), for
// the test command's report (tests/skip_report.py: every skip named, and CI failing on one that is not about the
// machine).
class SkipLog : public ::testing::EmptyTestEventListener {
    void OnTestEnd(const ::testing::TestInfo& info) override {
        const char* log = std::getenv("PLAINLLAMA_SKIP_LOG");
        if (!log || !*log || !info.result()->Skipped()) return;
        std::string reason;
        for (int i = 0; i < info.result()->total_part_count(); ++i)
            if (info.result()->GetTestPartResult(i).skipped()) reason = info.result()->GetTestPartResult(i).message();
        if (reason.empty()) reason = "(no reason given)";
        std::replace(reason.begin(), reason.end(), '\n', ' ');
        const std::string line =
            std::string("gtest ") + info.test_suite_name() + "." + info.name() + ": " + reason + "\n";
        const int fd = ::open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) return;
        (void)!::write(fd, line.data(), line.size());  // one write: lines of parallel tests do not mix
        ::close(fd);
    }
};

const bool kSkipLogInstalled = [] {
    ::testing::UnitTest::GetInstance()->listeners().Append(new SkipLog);
    return true;
}();

}  // namespace

std::string read_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + p.string());
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void write_file(const fs::path& p, const std::string& bytes) {
    std::ofstream out(p, std::ios::binary);
    out.write(bytes.data(), std::streamsize(bytes.size()));
    if (!out) throw std::runtime_error("cannot write " + p.string());
}

nlohmann::json read_json(const fs::path& p) { return nlohmann::json::parse(read_file(p)); }

void set_config(const fs::path& dir, const std::string& key, const nlohmann::json& value) {
    nlohmann::json c = read_json(dir / "config.json");
    c[key] = value;
    write_file(dir / "config.json", c.dump(2));
}

ChatMessage user(const std::string& text) { return {Role::user, text, false, {}}; }
ChatMessage generated(const std::string& text, std::vector<int32_t> ids) {
    return {Role::assistant, text, true, std::move(ids)};
}

TempDir::TempDir() {
    std::random_device rd;
    path_ = fs::temp_directory_path() / ("plainllama-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
    fs::create_directories(path_);
}

TempDir::~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
}

void expect_stories260K_config(const LlamaConfig& c) {
    EXPECT_EQ(c.hidden_size, 64);
    EXPECT_EQ(c.num_hidden_layers, 5);
    EXPECT_EQ(c.num_attention_heads, 8);
    EXPECT_EQ(c.num_key_value_heads, 4);
    EXPECT_EQ(c.head_dim, 8);
    EXPECT_EQ(c.intermediate_size, 172);
    EXPECT_EQ(c.vocab_size, 512);
    EXPECT_EQ(c.max_position_embeddings, 512);
    EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
    EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
    EXPECT_EQ(c.rope_scaling.rope_type, RopeType::none);
    EXPECT_TRUE(c.tie_word_embeddings);
    EXPECT_EQ(c.bos_token_id, 1);
    EXPECT_EQ(c.eos_token_id, std::vector<int64_t>{2});
    EXPECT_TRUE(c.is_eos(2));
    EXPECT_FALSE(c.is_eos(1));
    EXPECT_EQ(c.hidden_act, "silu");
}

void copy_model(const fs::path& from, const fs::path& to) {
    fs::create_directories(to);
    for (const auto& e : fs::directory_iterator(from)) {
        fs::copy_file(e.path(), to / e.path().filename(), fs::copy_options::overwrite_existing);
        fs::permissions(to / e.path().filename(), fs::perms::owner_read | fs::perms::owner_write,
                        fs::perm_options::add);
    }
}

void write_safetensors(const fs::path& p, const std::vector<RawTensor>& tensors, size_t pad) {
    nlohmann::ordered_json h = nlohmann::ordered_json::object();
    std::string data;
    for (const RawTensor& t : tensors) {
        data.append(pad, '\0');
        const size_t begin = data.size();
        data += t.bytes;
        h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {begin, data.size()}}};
    }
    const std::string header = h.dump();
    std::string out(8, '\0');
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) out[size_t(i)] = char((n >> (8 * i)) & 0xff);
    write_file(p, out + header + data);
}

std::vector<RawTensor> read_safetensors(const fs::path& p) {
    const std::string f = read_file(p);
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = n << 8 | uint8_t(f[size_t(i)]);
    const auto h = nlohmann::json::parse(f.substr(8, n));
    std::vector<std::pair<uint64_t, RawTensor>> v;
    for (auto it = h.begin(); it != h.end(); ++it) {
        if (it.key() == "__metadata__") continue;
        const uint64_t b = it.value()["data_offsets"][0], e = it.value()["data_offsets"][1];
        v.push_back({b,
                     {it.key(), it.value()["dtype"], it.value()["shape"].get<std::vector<int64_t>>(),
                      f.substr(8 + n + b, e - b)}});
    }
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<RawTensor> out;
    for (auto& [_, t] : v) out.push_back(std::move(t));
    return out;
}

namespace {

std::string drain(int fd) {
    std::string s;
    char buf[65536];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) s.append(buf, size_t(n));
    return s;
}

}  // namespace

ScopedEnv::ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* v = std::getenv(name)) {
        had_ = true;
        saved_ = v;
    }
    ::setenv(name, value.c_str(), 1);
}

ScopedEnv::~ScopedEnv() {
    if (had_)
        ::setenv(name_.c_str(), saved_.c_str(), 1);
    else
        ::unsetenv(name_.c_str());
}

RunResult run_binary(const std::vector<std::string>& args, const std::string& input, uint64_t address_space_bytes) {
    TempDir tmp;
    const fs::path in = tmp / "stdin", out = tmp / "stdout", err = tmp / "stderr";
    write_file(in, input);
    const pid_t pid = ::fork();
    if (pid == 0) {
        if (address_space_bytes) {
            struct rlimit rl = {address_space_bytes, address_space_bytes};
            ::setrlimit(RLIMIT_AS, &rl);
        }
        const int fi = ::open(in.c_str(), O_RDONLY), fo = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600),
                  fe = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        ::dup2(fi, 0);
        ::dup2(fo, 1);
        ::dup2(fe, 2);
        std::vector<std::string> argv_s = {binary().string()};
        argv_s.insert(argv_s.end(), args.begin(), args.end());
        std::vector<char*> argv;
        for (auto& a : argv_s) argv.push_back(a.data());
        argv.push_back(nullptr);
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    int st = 0;
    ::waitpid(pid, &st, 0);
    RunResult r;
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    const int fo = ::open(out.c_str(), O_RDONLY), fe = ::open(err.c_str(), O_RDONLY);
    r.out = drain(fo);
    r.err = drain(fe);
    ::close(fo);
    ::close(fe);
    return r;
}

}  // namespace plainllama::test
