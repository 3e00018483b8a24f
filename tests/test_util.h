// Helpers shared by the tests: paths to ../shared, JSON files, temp folders, running the binary.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace plainllama::test {

namespace fs = std::filesystem;

inline fs::path shared_dir() { return PLAINLLAMA_SHARED_DIR; }
inline fs::path model_dir(const std::string& name = "stories260K") { return shared_dir() / "models" / name; }
inline fs::path binary() { return PLAINLLAMA_BINARY; }
inline fs::path source_dir() { return PLAINLLAMA_SOURCE_DIR; }

nlohmann::json read_json(const fs::path& p);
std::string read_file(const fs::path& p);
void write_file(const fs::path& p, const std::string& bytes);

// A fresh directory under the system temp dir, removed when the object dies.
class TempDir {
public:
    TempDir();
    ~TempDir();
    const fs::path& path() const { return path_; }
    fs::path operator/(const std::string& name) const { return path_ / name; }

private:
    fs::path path_;
};

// Copies a model folder's files into dir (so a test can edit one of them).
void copy_model(const fs::path& from, const fs::path& to);

struct RunResult {
    int status = -1;  // exit status, or 128 + signal
    std::string out, err;
};
// Runs the plainllama binary with args (no shell), stdin from `input`.
RunResult run_binary(const std::vector<std::string>& args, const std::string& input = "");

}  // namespace plainllama::test
