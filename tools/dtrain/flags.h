// Numeric flags with their accepted range, declared once next to the flag: the parser
// enforces it (a value outside it, an overflow, nan, inf or trailing junk is a usage error
// naming the flag and the range), --help shows it, and `dtrain ranges` lists every one of
// them for docs/cli.md.
#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace dtcli {

// Bad input on the command line: main() prints "dtrain <command>: <message>" as one line
// and exits 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// [lo, hi]; `zero`, when set, says what 0 means (such as "all cores" or "off"): the text is
// then "0 (all cores) or 1 to 1024", or "0 (greedy) to 100" when lo is 0; 0 is accepted.
template <class T>
struct Range {
  T lo, hi;
  const char* zero = nullptr;
};

// "1 to 1024", "0 (all cores) or 1 to 1024".
std::string range_text(const Range<int64_t>& r);
std::string range_text(const Range<double>& r);

// Adds `flag` to `app`, storing into `value`; the help line gets the range, and the default
// (value's initial content) when that is inside the range (outside it means "not given").
CLI::Option* add_int(CLI::App* app, const std::string& flag, int64_t& value, Range<int64_t> range,
                     const std::string& help);
CLI::Option* add_real(CLI::App* app, const std::string& flag, double& value, Range<double> range,
                      const std::string& help);

// Every flag added so far, as the rows of a Markdown table (command, flag, accepted).
std::string ranges_markdown();

// Bytes of physical memory on this machine (sysconf); a size that needs more is refused.
int64_t physical_memory_bytes();
// "12.3 GB"-style.
std::string format_bytes(double bytes);
// Throws UsageError "<flag> <value>: needs about N bytes (<why>); this machine has M" when
// `bytes` exceeds the machine's physical memory.
void refuse_if_too_big(const std::string& flag_and_value, double bytes, const std::string& why);

}  // namespace dtcli
