// write_file_atomic: the new bytes whole or the old file untouched; a symlink written through; the file's mode kept.
#include "plainllama/io/file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "plainllama/sys/error.h"
#include "test_util.h"

namespace plainllama {
namespace {

namespace fs = std::filesystem;

int entries(const fs::path& dir) {
    int n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
    return n;
}

TEST(WriteFileAtomic, ReplacesWholeKeepsModeAndLinks) {
    test::TempDir tmp;
    const fs::path f = tmp / "t.json";
    write_file_atomic(f, "first");
    EXPECT_EQ(test::read_file(f), "first");
    ::chmod(f.c_str(), 0600);
    write_file_atomic(f, "second, longer");
    EXPECT_EQ(test::read_file(f), "second, longer");
    struct stat st {};
    ASSERT_EQ(::stat(f.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0600u);
    EXPECT_EQ(entries(tmp.path()), 1);  // no temporary file left

    // through a symlink: the link stays a link, the file it points at gets the bytes
    const fs::path link = tmp / "link.json";
    fs::create_symlink(f, link);
    write_file_atomic(link, "third");
    EXPECT_TRUE(fs::is_symlink(link));
    EXPECT_EQ(test::read_file(f), "third");

    // a failure names the file and the errno's text, and leaves nothing behind
    auto error_of = [](const fs::path& p) {
        try {
            write_file_atomic(p, "x");
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_EQ(error_of(tmp / "missing" / "x.json"),
              (tmp / "missing" / "x.json").string() + ": cannot be written: No such file or directory");
    EXPECT_EQ(error_of("/dev/full"), "/dev/full: cannot be written: No space left on device");
    EXPECT_EQ(entries(tmp.path()), 2);
}

TEST(WriteFileAtomic, NewFileTakesTheModeAsked) {
    test::TempDir tmp;
    const mode_t old = ::umask(022);
    write_file_atomic(tmp / "private", "secret", 0600);
    write_file_atomic(tmp / "shared", "public");
    ::umask(old);
    struct stat st {};
    ASSERT_EQ(::stat((tmp / "private").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0600u);
    ASSERT_EQ(::stat((tmp / "shared").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0644u);
}

}  // namespace
}  // namespace plainllama
