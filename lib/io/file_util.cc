#include "io/file_util.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace dt::io {

void io_fail(const std::string& path, const std::string& what) {
  int e = errno;
  fail(DT_ERR_IO, path + ": " + what + (e ? std::string(" (") + std::strerror(e) + ")" : std::string()));
}

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string dir_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::vector<char> read_file(const std::string& path) {
  errno = 0;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) io_fail(path, "cannot open");
  struct stat st;
  if (::fstat(fd, &st) != 0) { ::close(fd); io_fail(path, "cannot stat"); }
  std::vector<char> buf(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < buf.size()) {
    ssize_t r = ::read(fd, buf.data() + got, buf.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) { ::close(fd); io_fail(path, "read failed at byte " + std::to_string(got)); }
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  return buf;
}

MappedFile::MappedFile(const std::string& path) {
  errno = 0;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) io_fail(path, "cannot open");
  struct stat st;
  if (::fstat(fd, &st) != 0) { ::close(fd); io_fail(path, "cannot stat"); }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {  // mmap of 0 bytes is an error; an empty file maps to nothing
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) { ::close(fd); io_fail(path, "cannot mmap"); }
    data_ = static_cast<const unsigned char*>(p);
  }
  ::close(fd);  // the mapping keeps the file alive
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<unsigned char*>(data_), size_);
}

void fsync_dir(const std::string& dir) {
  errno = 0;
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) io_fail(dir, "cannot open directory to fsync");
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) io_fail(dir, "fsync of directory failed");
}

AtomicFile::AtomicFile(const std::string& path) : path_(path) {
  // pid + counter: concurrent writers (ranks of one process, or processes) never share a temp.
  static std::atomic<uint64_t> counter{0};
  tmp_ = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  errno = 0;
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) io_fail(tmp_, "cannot create");
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
}

void AtomicFile::write(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    errno = 0;
    ssize_t w = ::write(fd_, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) io_fail(tmp_, "write failed");
    p += w, n -= static_cast<size_t>(w);
  }
}

void AtomicFile::commit() {
  errno = 0;
  if (::fsync(fd_) != 0) io_fail(tmp_, "fsync failed");
  int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) io_fail(tmp_, "close failed");
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) io_fail(path_, "rename from " + tmp_ + " failed");
  tmp_.clear();  // renamed: nothing left to remove
  fsync_dir(dir_of(path_));
}

}  // namespace dt::io
