// io/file.hpp and io/limit.hpp: atomic writes that leave nothing behind when they fail, and
// sizes checked against their limit before anything is made.
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>

#include <unistd.h>

#include <qkv/io/file.hpp>
#include <qkv/io/limit.hpp>

namespace fs = std::filesystem;
namespace io = qkv::io;

namespace {

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::size_t entries(const fs::path& dir) {
  return static_cast<std::size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

/// a fresh empty directory under the system's temporary directory
struct scratch {
  fs::path dir;
  scratch() {
    dir = fs::temp_directory_path() / ("qkv_file_test_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~scratch() { fs::remove_all(dir); }
};

}  // namespace

TEST_CASE("write_text_file replaces a file whole and leaves no temporary") {
  scratch s;
  const auto p = s.dir / "a.svg";
  io::write_text_file(p.string(), "first version, longer than the second");
  io::write_text_file(p.string(), "second");
  CHECK(read_all(p) == "second");
  CHECK(entries(s.dir) == 1);  // no .a.svg.tmp-* left
}

TEST_CASE("a file that cannot be written leaves nothing behind and names the file") {
  scratch s;
  CHECK_THROWS_WITH_AS(io::write_text_file((s.dir / "no_such_dir" / "a.svg").string(), "x"),
                       doctest::Contains("cannot create '"), io::file_error);
  // a directory at the path: refused by name, the directory untouched
  fs::create_directory(s.dir / "d");
  CHECK_THROWS_WITH_AS(io::write_text_file((s.dir / "d").string(), "x"),
                       doctest::Contains("': is a directory"), io::file_error);
  CHECK(fs::is_directory(s.dir / "d"));
  CHECK(entries(s.dir) == 1);
}

TEST_CASE("write_text_files writes all of its files or none of them") {
  scratch s;
  const auto svg = s.dir / "a.svg", html = s.dir / "a.html";
  fs::create_directory(s.dir / "d");
  // the second fails: the first is not left behind
  CHECK_THROWS_AS(io::write_text_files({{svg.string(), "<svg/>"}, {(s.dir / "d").string(), "<html/>"}}),
                  io::file_error);
  CHECK(!fs::exists(svg));
  CHECK(entries(s.dir) == 1);
  // an existing file is untouched by a failed call
  io::write_text_file(svg.string(), "old");
  CHECK_THROWS_AS(io::write_text_files({{svg.string(), "new"}, {(s.dir / "x" / "y").string(), "z"}}),
                  io::file_error);
  CHECK(read_all(svg) == "old");
  io::write_text_files({{svg.string(), "<svg/>"}, {html.string(), "<html/>"}});
  CHECK(read_all(svg) == "<svg/>");
  CHECK(read_all(html) == "<html/>");
  CHECK(entries(s.dir) == 3);
}

TEST_CASE("a symbolic link is written through, and a device is written in place") {
  scratch s;
  io::write_text_file((s.dir / "real.txt").string(), "old");
  fs::create_symlink(s.dir / "real.txt", s.dir / "link.txt");
  io::write_text_file((s.dir / "link.txt").string(), "new");
  CHECK(fs::is_symlink(s.dir / "link.txt"));
  CHECK(read_all(s.dir / "real.txt") == "new");
  io::write_text_file("/dev/null", "nothing");  // not replaced by a regular file
  CHECK(fs::is_character_file("/dev/null"));
  // a link to a device (as /dev/stdout is) is written through in place, no file made beside it
  fs::create_symlink("/dev/null", s.dir / "null_link");
  io::write_text_file((s.dir / "null_link").string(), "nothing");
  CHECK(fs::is_symlink(s.dir / "null_link"));
  CHECK(entries(s.dir) == 3);
}

TEST_CASE("checked_product saturates instead of wrapping, and check_limit names size, limit and option") {
  constexpr auto max = std::numeric_limits<std::uint64_t>::max();
  static_assert(io::checked_product({3, 4, 5}) == 60);
  static_assert(io::checked_product({0, max, max}) == 0);
  static_assert(io::checked_product({std::uint64_t{1} << 32, std::uint64_t{1} << 32}) ==
                max);  // 2^64 does not fit
  static_assert(io::checked_sum({max, 1}) == max);
  CHECK_NOTHROW(io::check_limit("the weights", 16, 16));
  CHECK_THROWS_WITH_AS(
      io::check_limit("the weights", 17, 16),
      "the weights would be 17 elements, above the limit of 16 (raise it with --max-elements N)",
      io::limit_error);
  CHECK_THROWS_WITH_AS(
      io::check_limit("the page", max, 16, "cells", "--max-cells"),
      "the page would be at least 2^64 - 1 cells, above the limit of 16 (raise it with --max-cells N)",
      io::limit_error);
}
