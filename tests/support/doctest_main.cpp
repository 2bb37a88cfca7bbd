// the doctest main, in its own translation unit (it is the slow one to compile).
// One test program may hold several test files (tests/runtime/: one program, a meson test per file,
// chosen with --source-file); a filter that matches no test case fails, so that a renamed or
// emptied file cannot pass by running nothing.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

namespace {
unsigned test_cases_run = 0;

// a listener: told the run's statistics at the end, it keeps how many test cases passed the filters
struct count_test_cases : doctest::IReporter {
  explicit count_test_cases(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& stats) override {
    test_cases_run = stats.numTestCasesPassingFilters;
  }
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};
REGISTER_LISTENER("count_test_cases", 1, count_test_cases);
}  // namespace

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int result = context.run();
  if (context.shouldExit() || result != 0) return result;  // --help, --list-*, or a failure
  if (test_cases_run == 0) {
    std::fputs("doctest_main: no test case matched the filters (a file renamed or emptied?)\n", stderr);
    return 1;
  }
  return 0;
}
