// dtrain: train, generate and evaluate from the command line, through libdtrain's C API.
#include <cstdio>

#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"dtrain " + std::string(dt_version()) +
               ": train and run transformer models with libdtrain.\n"
               "Start with the demo: dtrain train --data addition (a small GPT learns 3-digit addition),\n"
               "then dtrain generate --prompt \"123+456=\" and dtrain eval. Add --help to any command."};
  app.require_subcommand(1);
  // A flag given twice takes the last value (as most command lines do), so a script can
  // append overrides to a base command.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.set_version_flag("--version", std::string(dt_version()));
  dtcli::add_train_command(app);
  dtcli::add_generate_command(app);
  dtcli::add_eval_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const dtcli::Exit& e) {
    return e.code;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "\ndtrain: error: %s\n", e.what());
    return 2;
  }
  return 0;
}
