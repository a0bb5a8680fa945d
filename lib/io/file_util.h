// File helpers for io: whole-file reads, a read-only mapping, and atomic replacement.
// Every failure is a dt::Error with DT_ERR_IO naming the path and the system's reason.
// Reads open only regular files: a FIFO, a device or a directory named by a hostile
// checkpoint index or a mistyped flag is refused at once instead of blocking in open/read
// (opened O_NONBLOCK, checked with fstat, then read blocking).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dt::io {

[[noreturn]] void io_fail(const std::string& path, const std::string& what);  // DT_ERR_IO, with errno text
// The whole file; `max_bytes` bounds what a file from outside may make us allocate (the
// error names `what`, e.g. "a checkpoint index", and both sizes).
std::vector<char> read_file(const std::string& path, uint64_t max_bytes = UINT64_MAX, const char* what = "this file");
bool file_exists(const std::string& path);

// A read-only memory mapping of a whole file (token files can exceed RAM).
class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
};

// Writes `path` so that readers see either the old file or the complete new one, never a
// mix: bytes go to a temp file in the same directory (rename is atomic only within one
// file system), which is fsynced, renamed over `path`, and then the directory is fsynced
// so the rename itself survives a crash. Destroyed without commit(), it removes the temp.
class AtomicFile {
 public:
  explicit AtomicFile(const std::string& path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  void write(const void* data, size_t n);
  void commit();
  const std::string& temp_path() const { return tmp_; }

 private:
  std::string path_, tmp_;
  int fd_ = -1;
};

void fsync_dir(const std::string& dir);

// Removes, best effort, the temps AtomicFile left for `target` (a crash between create and
// rename leaves "<target>.tmp.<pid>.<n>") whose writer process no longer runs. A live
// writer's temp is kept: it may be mid-save. Returns how many were removed.
int remove_stale_temps(const std::string& target);
std::string dir_of(const std::string& path);

}  // namespace dt::io
