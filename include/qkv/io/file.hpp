// file.hpp: writing text files atomically: a temporary file in the same directory, then rename.
//
//   qkv::io::write_text_file("weights.svg", svg);                    // one file
//   qkv::io::write_text_files({{"a.svg", svg}, {"a.html", page}});   // all of them or none
//
// A reader never sees a half-written file, and a failure (a full disk, a missing directory, a
// path that is a directory) leaves no partial file behind: the temporary is removed and a file
// already at the path is untouched. write_text_files writes every temporary before it renames
// any, and if a later rename fails it removes the files it already renamed, so a command that
// writes several outputs leaves all of them or none.
//
// The temporary is ".NAME.tmp-PID-N" next to the target (the same file system, so rename(2) is
// atomic), created with O_EXCL and mode 0666 less the umask, as a plain open would. A path that
// names a symbolic link writes the file the link points to. A path that exists and is not a
// regular file or a directory (/dev/null, a pipe) cannot be replaced by a rename: it is written
// in place. POSIX only (open, rename, unlink).
#pragma once

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

namespace qkv::io {

/// a file that cannot be written: what() names the file and the reason
struct file_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// one output of write_text_files: the path and its text, both owned (a view here once wrote
/// garbage into a checkpoint when the caller passed a temporary: a page is copied once, a
/// negligible cost beside writing it)
struct text_output {
  std::string path;
  std::string text;
};

namespace file_detail {

[[nodiscard]] inline std::string reason(int err) { return std::generic_category().message(err); }

/// write all of text to the open descriptor fd; false (errno set) on failure
[[nodiscard]] inline bool write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    text.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

/// where a write to `path` goes: the file a symbolic link points to, else path itself
[[nodiscard]] inline std::filesystem::path target_of(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_symlink(fs::symlink_status(path, ec))) {
    const auto t = fs::weakly_canonical(fs::path(path), ec);
    if (!ec) return t;
  }
  return fs::path(path);
}

/// a temporary file written next to the target, not yet renamed
struct pending {
  std::string shown;  // the path as the user gave it, for messages
  std::filesystem::path target;
  std::filesystem::path temp;  // empty: written in place (not a regular file)
};

inline void remove_quietly(const std::filesystem::path& p) {
  if (!p.empty()) ::unlink(p.c_str());
}

/// write text to a temporary next to `path` (or in place, for a device or a pipe)
[[nodiscard]] inline pending stage(const std::string& path, std::string_view text) {
  namespace fs = std::filesystem;
  if (path.empty()) throw file_error("cannot create a file with an empty name");
  pending p{path, fs::path(path), {}};
  std::error_code ec;
  const auto st = fs::status(p.target, ec);  // through symbolic links
  if (fs::is_directory(st)) throw file_error("cannot write '" + path + "': is a directory");
  if (fs::exists(st) && !fs::is_regular_file(st)) {  // /dev/null, /dev/stdout, a pipe: no rename over them
    const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd < 0) throw file_error("cannot create '" + path + "': " + reason(errno));
    const bool ok = write_all(fd, text);
    const int err = errno;
    if (::close(fd) != 0 || !ok) throw file_error("cannot write '" + path + "': " + reason(ok ? errno : err));
    return p;
  }
  p.target = target_of(path);  // a regular file, or none yet: a link is written through
  static std::atomic<unsigned long> counter{0};
  const auto dir = p.target.parent_path();
  const std::string name = "." + p.target.filename().string() + ".tmp-" + std::to_string(::getpid()) + "-";
  for (int attempt = 0;; ++attempt) {
    p.temp = dir / (name + std::to_string(counter.fetch_add(1)));
    const int fd = ::open(p.temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
      if (errno == EEXIST && attempt < 100) continue;
      throw file_error("cannot create '" + path + "': " + reason(errno));
    }
    const bool ok = write_all(fd, text);
    const int err = errno;
    const bool closed = ::close(fd) == 0;
    if (!ok || !closed) {
      const int e = ok ? errno : err;
      remove_quietly(p.temp);
      throw file_error("cannot write '" + path + "': " + reason(e));
    }
    return p;
  }
}

}  // namespace file_detail

/// @brief write every file or none: all temporaries first, then the renames. Throws file_error
/// naming the first file that fails; nothing written by this call is left behind then.
inline void write_text_files(const std::vector<text_output>& files) {
  std::vector<file_detail::pending> staged;
  try {
    for (const auto& f : files) staged.push_back(file_detail::stage(f.path, f.text));
  } catch (...) {
    for (const auto& p : staged) file_detail::remove_quietly(p.temp);
    throw;
  }
  for (std::size_t k = 0; k < staged.size(); ++k) {
    const auto& p = staged[k];
    if (p.temp.empty()) continue;  // written in place
    if (std::rename(p.temp.c_str(), p.target.c_str()) != 0) {
      const int err = errno;
      for (std::size_t r = 0; r < staged.size(); ++r) {
        if (staged[r].temp.empty()) continue;
        file_detail::remove_quietly(r < k ? staged[r].target : staged[r].temp);
      }
      throw file_error("cannot write '" + p.shown + "': " + file_detail::reason(err));
    }
  }
}

/// @brief write text to path atomically (see the top of this file); throws file_error (a
/// std::runtime_error) naming the file
inline void write_text_file(const std::string& path, std::string_view text) {
  write_text_files({text_output{path, std::string(text)}});
}

}  // namespace qkv::io
