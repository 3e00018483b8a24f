// The skip log (test_util.cpp's listener): a skipped test is appended to $PLAINLLAMA_SKIP_LOG with its name and its
// reason, for the test command's report (tests/skip_report.py). Checked on this test binary itself, run again with
// the one test that skips.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include "test_util.h"

namespace plainllama {
namespace {

TEST(SkipLog, NamesTheTestAndItsReason) {
    if (std::getenv("PLAINLLAMA_SKIP_LOG_SELF_TEST"))
        GTEST_SKIP() << "machine: the skip log's own test,\nrun by itself";  // (a newline: the line stays one)
    test::TempDir tmp;
    const std::string log = (tmp / "skipped.txt").string();
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        ::setenv("PLAINLLAMA_SKIP_LOG_SELF_TEST", "1", 1);
        ::setenv("PLAINLLAMA_SKIP_LOG", log.c_str(), 1);
        const int null = ::open("/dev/null", O_WRONLY);
        ::dup2(null, 1);
        ::execl("/proc/self/exe", "plainllama_tests", "--gtest_filter=SkipLog.NamesTheTestAndItsReason", nullptr);
        ::_exit(127);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    EXPECT_EQ(test::read_file(log),
              "gtest SkipLog.NamesTheTestAndItsReason: machine: the skip log's own test, run by itself\n");
}

}  // namespace
}  // namespace plainllama
