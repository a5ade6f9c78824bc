#pragma once
// A scratch directory of one test case, removed at its end (the unit tests' files on disk).

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace testing_files {

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    static int counter = 0;
    path = std::filesystem::temp_directory_path() /
           ("mlaplan-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  /// Writes `text` to the file `name` of the directory; its path.
  std::string write(const std::string& name, const std::string& text) const {
    const auto p = path / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  /// The path of the file `name` of the directory.
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

}  // namespace testing_files
