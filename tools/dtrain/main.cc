// dtrain: train, generate and evaluate from the command line, through libdtrain's C API.
#include <cstdio>

#include "commands.h"
#include "flags.h"

namespace {

// "dtrain train" when the error came while parsing train's flags, else "dtrain".
std::string command_of(const CLI::App& app) {
  const auto parsed = app.get_subcommands();
  return parsed.empty() ? "dtrain" : "dtrain " + parsed.front()->get_name();
}

// One line, whatever the message held.
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n') c = ' ';
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dtrain " + std::string(dt_version()) +
               ": train and run transformer models with libdtrain.\n"
               "Start with the demo (a small GPT learns 3-digit addition in about a minute):\n"
               "  dtrain train --data addition --layers 2 --d-model 128 --heads 4 --steps 2000 --batch 64 --lr 3e-3\n"
               "then dtrain generate --prompt \"123+456=\" and dtrain eval. Add --help to any command."};
  app.require_subcommand(1);
  // A flag given twice takes the last value (as most command lines do), so a script can
  // append overrides to a base command.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.set_version_flag("--version", std::string(dt_version()));
  dtcli::add_train_command(app);
  dtcli::add_generate_command(app);
  dtcli::add_eval_command(app);
  dtcli::add_plan_command(app);
  dtcli::add_serve_command(app);
  dtcli::add_inspect_command(app);
  dtcli::add_export_command(app);
  dtcli::add_info_command(app);
  dtcli::add_checkpoint_command(app);
  app.add_subcommand("ranges", "Every numeric flag of every command with its accepted range (a Markdown table)")
      ->callback([] {
        std::fputs(dtcli::ranges_markdown().c_str(), stdout);
        throw dtcli::Exit{0};
      });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" that exit 0; the rest are usage errors: one line
    // (not CLI11's two), exit 2.
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "%s: %s\n", command_of(app).c_str(), one_line(e.what()).c_str());
    return 2;
  } catch (const dtcli::UsageError& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: %s\n", command_of(app).c_str(), one_line(e.what()).c_str());
    return 2;
  } catch (const dtcli::Exit& e) {
    return e.code;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "\ndtrain: error: %s\n", one_line(e.what()).c_str());
    return 2;
  }
  return 0;
}
