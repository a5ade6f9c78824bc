#pragma once
// Special files for the tests of "only regular files are read": a bound AF_UNIX socket.

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <string>

namespace testing_files {

/// A bound AF_UNIX socket at `path` (a socket file), closed with the object.
struct UnixSocket {
  int fd = -1;
  explicit UnixSocket(const std::string& path) {
    fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    REQUIRE(path.size() < sizeof(addr.sun_path));
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    REQUIRE(::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0);
  }
  ~UnixSocket() { ::close(fd); }
  UnixSocket(const UnixSocket&) = delete;
  UnixSocket& operator=(const UnixSocket&) = delete;
};

}  // namespace testing_files
