// The subcommands of `dtrain`; each registers itself on the app and, when run, throws
// Exit with its exit code (CLI11 callbacks return nothing).
#pragma once
#include <CLI/CLI.hpp>

#include "cli.h"

namespace dtcli {

struct Exit {
  int code;
};

void add_train_command(CLI::App& app);
void add_generate_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_plan_command(CLI::App& app);
void add_serve_command(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_export_command(CLI::App& app);
void add_info_command(CLI::App& app);
void add_checkpoint_command(CLI::App& app);

}  // namespace dtcli
