// Writing new files (io/output.h): a file appears whole under its final name or not at all, never through a symlink;
// an output folder must be new or empty (a killed writer's leftovers aside); what a failed or signalled writer leaves
// is removed.
#include "plainllama/io/output.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include "plainllama/sys/error.h"
#include "test_util.h"

namespace plainllama {
namespace {

namespace fs = std::filesystem;
using test::HasSubstr;

std::vector<std::string> listing(const fs::path& dir) {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
}

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

TEST(PartialFile, AppearsWholeOrNotAtAll) {
    test::TempDir tmp;
    {
        PartialFile f(tmp / "out.bin");
        f.write("hello ");
        EXPECT_EQ(listing(tmp.path()), std::vector<std::string>{".out.bin." + std::to_string(::getpid()) + ".partial"});
        f.write(std::string(100000, 'x'));
        f.commit();
    }
    EXPECT_EQ(listing(tmp.path()), std::vector<std::string>{"out.bin"});
    EXPECT_EQ(test::read_file(tmp / "out.bin"), "hello " + std::string(100000, 'x'));
    {
        PartialFile f(tmp / "other.bin");
        f.write("half");
    }  // destroyed before commit: as if never written
    EXPECT_EQ(listing(tmp.path()), std::vector<std::string>{"out.bin"});
}

TEST(PartialFile, ReplacesASymlinkNeverWritesThroughIt) {
    test::TempDir tmp;
    test::write_file(tmp / "victim", "precious");
    fs::create_symlink(tmp / "victim", tmp / "out");
    PartialFile f(tmp / "out", 0600);
    f.write("new");
    f.commit();
    EXPECT_EQ(test::read_file(tmp / "victim"), "precious");
    EXPECT_FALSE(fs::is_symlink(tmp / "out"));
    EXPECT_EQ(test::read_file(tmp / "out"), "new");
    EXPECT_EQ(fs::status(tmp / "out").permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
}

TEST(PartialFile, ErrorsNameTheFileAndTheErrno) {
    const std::string e = error_of([] { PartialFile f("/nonexistent-folder/x.bin"); });
    EXPECT_EQ(e, "/nonexistent-folder/x.bin: cannot be written: No such file or directory");
}

TEST(OutputFolder, NewFoldersAreMadeAndRemovedUnlessKept) {
    test::TempDir tmp;
    {
        OutputFolder out(tmp / "a" / "b");
        EXPECT_TRUE(fs::is_directory(tmp / "a" / "b"));
    }  // not kept: the writing failed
    EXPECT_EQ(listing(tmp.path()), std::vector<std::string>{});
    {
        OutputFolder out(tmp / "a" / "b");
        PartialFile f(out.path() / "x");
        f.write("x");
        f.commit();
        out.keep();
    }
    EXPECT_EQ(listing(tmp / "a" / "b"), std::vector<std::string>{"x"});
}

TEST(OutputFolder, MustBeEmpty) {
    test::TempDir tmp;
    fs::create_directory(tmp / "empty");
    { OutputFolder ok(tmp / "empty"); }
    EXPECT_TRUE(fs::is_directory(tmp / "empty"));  // existing: left as it was

    fs::create_directory(tmp / "full");
    test::write_file(tmp / "full" / "config.json", "{}");
    test::write_file(tmp / "full" / "tokenizer.json", "{}");
    EXPECT_EQ(error_of([&] { OutputFolder f(tmp / "full"); }),
              (tmp / "full").string() +
                  ": is not empty (holds 'config.json' and 1 more); the output folder must be new or empty");
    test::write_file(tmp / "file", "x");
    EXPECT_TRUE(HasSubstr(error_of([&] { OutputFolder f(tmp / "file"); }), "file: exists and is not a folder"));
}

TEST(OutputFolder, AKilledWritersLeftoversAreRemovedOnlyWhenTheyAreAll) {
    test::TempDir tmp;
    // a pid above any pid_max (2^22): no process has it
    const std::string stale = ".model.safetensors.99999999.partial";
    EXPECT_TRUE(stale_partial(stale));
    EXPECT_FALSE(stale_partial(".model.safetensors.1.partial"));  // init runs
    EXPECT_FALSE(stale_partial(".model.safetensors." + std::to_string(::getpid()) + ".partial"));
    EXPECT_FALSE(stale_partial("model.safetensors.99999999.partial"));
    EXPECT_FALSE(stale_partial(".x.99999999x.partial"));
    EXPECT_FALSE(stale_partial("..99999999.partial"));

    fs::create_directory(tmp / "ours");
    test::write_file(tmp / "ours" / stale, "half");
    { OutputFolder f(tmp / "ours"); }
    EXPECT_EQ(listing(tmp / "ours"), std::vector<std::string>{});

    fs::create_directory(tmp / "mixed");  // the user's file beside it: the folder is not ours, nothing is touched
    test::write_file(tmp / "mixed" / stale, "half");
    test::write_file(tmp / "mixed" / "notes.txt", "mine");
    EXPECT_TRUE(HasSubstr(error_of([&] { OutputFolder f(tmp / "mixed"); }), "(holds 'notes.txt')"));
    EXPECT_EQ(listing(tmp / "mixed"), (std::vector<std::string>{stale, "notes.txt"}));

    fs::create_directory(tmp / "live");  // a writer that still runs (init's pid)
    test::write_file(tmp / "live" / ".model.safetensors.1.partial", "half");
    EXPECT_FALSE(error_of([&] { OutputFolder f(tmp / "live"); }).empty());
}

// A signal that ends the process while it writes: the partial files and the folders made for them are removed, and
// the process ends by that signal, as it would have without the cleanup.
TEST(OutputFolder, ASignalRemovesWhatTheWriterLeft) {
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGXFSZ}) {
        SCOPED_TRACE(sig);
        test::TempDir tmp;
        const pid_t child = ::fork();
        ASSERT_GE(child, 0);
        if (child == 0) {  // nothing of gtest in the child: it ends by the signal, or by _exit
            try {
                OutputFolder out(tmp / "q" / "r");
                PartialFile f(out.path() / "model.safetensors");
                f.write(std::string(1 << 20, 'x'));
                PartialFile g(out.path() / "config.json");
                ::raise(sig);
            } catch (...) {
            }
            ::_exit(3);  // not reached
        }
        int status = 0;
        ASSERT_EQ(::waitpid(child, &status, 0), child);
        EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig) << status;
        EXPECT_EQ(listing(tmp.path()), std::vector<std::string>{});
    }
}

}  // namespace
}  // namespace plainllama
