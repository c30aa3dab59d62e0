#pragma once
// ScratchDir: a directory under /tmp for one test (a document root, say), removed with
// everything in it at the end.
//
//   test::ScratchDir root("ucp-www");
//   root.write("css/site.css", "body{}");   // parents created
//   server_serving(root.path());
//
// Header-only.

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include <stdlib.h>

namespace ucp::test {

class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix = "ucp-scratch") {
    std::string name = "/tmp/" + prefix + "-XXXXXX";
    if (::mkdtemp(name.data()) != nullptr) dir_ = name;
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir() {
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }
  /// "" when mkdtemp failed.
  const std::string& path() const { return dir_; }
  std::string path(const std::string& relative) const { return dir_ + "/" + relative; }
  /// Creates or replaces the file (a new inode if it existed: written to a new file).
  void write(const std::string& relative, const std::string& text) const {
    std::filesystem::create_directories(std::filesystem::path(path(relative)).parent_path());
    std::ofstream(path(relative), std::ios::binary | std::ios::trunc) << text;
  }
  /// Rewrites the file in place (same inode), as an editor that truncates does.
  void rewrite(const std::string& relative, const std::string& text) const {
    std::fstream out(path(relative),
                     std::ios::binary | std::ios::in | std::ios::out | std::ios::trunc);
    out << text;
  }

 private:
  std::string dir_;
};

}  // namespace ucp::test
