// dtrain train --report (report.cc).
#pragma once
#include <nlohmann/json.hpp>

#include "cli.h"

namespace dtcli {

// Prints the memory ledger per rank next to the model-state formulas and, with a mesh,
// rank 0's all-reduce traffic next to the gradient bytes; returns all of it as JSON.
nlohmann::json print_report(dt_mesh* mesh, int64_t params, const std::string& precision, int64_t ranks,
                            int64_t steps);

}  // namespace dtcli
