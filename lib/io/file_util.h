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

// A read-only file read at offsets (token files can exceed RAM: only what is asked for is
// read). Why pread and not a mapping: a mapped file that another process truncates while
// we use it raises SIGBUS on the next touch of a vanished page, killing a training run or
// a host process through the C API with no message. Guarding mapped reads would need a
// process-wide SIGBUS handler, which a library cannot own safely (JVM, Go and Python hosts
// install their own and chaining is fragile). pread instead returns short at the new end,
// which copy_to turns into a DT_ERR_IO naming the file; pread on one fd is thread safe.
class ReadOnlyFile {
 public:
  explicit ReadOnlyFile(const std::string& path);
  ~ReadOnlyFile();
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;
  size_t size() const { return size_; }  // at open
  const std::string& path() const { return path_; }
  // Copies bytes [offset, offset + n) to dst. Past size() is a caller bug (DT_ERR_INTERNAL);
  // a file that has shrunk since open is DT_ERR_IO ("truncated while in use").
  void copy_to(uint64_t offset, void* dst, size_t n) const;
  std::vector<unsigned char> read(uint64_t offset, size_t n) const;

 private:
  std::string path_;
  int fd_ = -1;
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
