// Writing new files that are complete or absent: a file is written under a hidden partial name beside its final one
// and renamed into place once every write, the flush to disk and the close succeeded; an output folder must be new or
// empty. What a failed or interrupted writer leaves is removed: on an error, when the object is destroyed, and when
// SIGINT, SIGTERM, SIGHUP or SIGXFSZ ends the process (those whose action was the default, from the first
// PartialFile on). Every failure is an Error naming the final path with the errno as the kernel gave it ("No space left
// on device"). The writers of `quantize` use these (a folder: OutputFolder, then a PartialFile per file; a single file:
// a PartialFile alone).
#pragma once
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

namespace plainllama {

class PartialFile {
   public:
    // Creates ".NAME.PID.partial" beside `final_path` (exclusively, never through a symlink), mode `mode` less the
    // umask.
    explicit PartialFile(std::filesystem::path final_path, unsigned mode = 0644);
    ~PartialFile();  // uncommitted: the partial file is removed
    PartialFile(const PartialFile&) = delete;
    PartialFile& operator=(const PartialFile&) = delete;

    void write(const void* data, size_t n);
    void write(const std::string& bytes) { write(bytes.data(), bytes.size()); }
    // Flushes to disk, closes and renames over the final name (a symlink there is replaced, not followed), then
    // flushes the folder.
    void commit();

    const std::filesystem::path& final_path() const { return final_; }
    const std::filesystem::path& partial_path() const { return partial_; }

   private:
    [[noreturn]] void fail(int err);
    std::filesystem::path final_, partial_;
    int fd_ = -1;
    int slot_ = -1;  // in the signal handler's list
    bool committed_ = false;
};

// A folder that a writer fills with new files. It must not exist (it is created, with its missing parents) or be empty;
// leftovers of a writer that was killed (our ".NAME.PID.partial" files whose process is gone) count as empty when they
// are all it holds, and are removed. Anything else there is an Error naming the folder and what it holds. Folders
// created here are removed again (when empty) if the writing does not finish: keep() once it did.
class OutputFolder {
   public:
    explicit OutputFolder(std::filesystem::path dir);
    ~OutputFolder();
    OutputFolder(const OutputFolder&) = delete;
    OutputFolder& operator=(const OutputFolder&) = delete;

    const std::filesystem::path& path() const { return dir_; }
    void keep() { kept_ = true; }

   private:
    std::filesystem::path dir_;
    std::vector<std::filesystem::path> created_;  // outermost first
    std::vector<int> slots_;
    bool kept_ = false;
};

// Whether `name` is a partial file of PartialFile's pattern (".NAME.PID.partial") whose process no longer runs.
bool stale_partial(const std::string& name);

}  // namespace plainllama
