// dtrain checkpoint inspect RUN: what a checkpoint holds and how it is stored (the layout that
// saved it, each writer's file, its chunks and bytes), from dt_checkpoint_info_json; and
// dtrain checkpoint consolidate RUN OUT: the same state rewritten as one writer's file, the
// single-rank layout (dt_checkpoint_consolidate).
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "flags.h"

namespace dtcli {
namespace {

struct CkptInspectArgs {
  std::string path, json;
};
struct CkptConsolidateArgs {
  std::string path, out;
};

// A run directory (dtrain train --out: its "ckpt") or a checkpoint's path stem.
std::string stem_of(const std::string& path) {
  if (std::filesystem::is_directory(path) && std::filesystem::exists(path + "/ckpt.index.json")) return path + "/ckpt";
  if (std::filesystem::exists(path + ".index.json")) return path;
  throw UsageError("checkpoint " + path + ": neither a run directory holding ckpt.index.json nor a stem with " + path +
                   ".index.json");
}

int run_ckpt_inspect(const CkptInspectArgs& a) {
  const std::string stem = stem_of(a.path);
  const nlohmann::json info = nlohmann::json::parse(read_text(
      [&](char* buf, size_t cap, size_t* need) { return dt_checkpoint_info_json(stem.c_str(), buf, cap, need); },
      "dt_checkpoint_info_json"));
  std::printf("%s: step %lld, format %lld, generation %lld\n", stem.c_str(), (long long)info.value("step", 0),
              (long long)info.value("format_version", 0), (long long)info.value("generation", 0));
  if (info.contains("model")) std::printf("  model %s\n", info["model"].get<std::string>().c_str());
  if (info.contains("layout")) {
    const nlohmann::json& l = info["layout"];
    std::printf("  saved by %lld ranks: dp %lld, tp %lld, pp %lld, ep %lld, cp %lld%s\n", (long long)l.value("world", 1),
                (long long)l.value("dp", 1), (long long)l.value("tp", 1), (long long)l.value("pp", 1),
                (long long)l.value("ep", 1), (long long)l.value("cp", 1), l.value("zero", false) ? ", ZeRO" : "");
  } else {
    std::printf("  saved by one rank (the single-rank layout)\n");
  }
  std::printf("  %lld tensors in %lld chunks, %s in %zu file(s)\n", (long long)info.value("tensors", 0),
              (long long)info.value("chunks", 0), format_bytes(info.value("bytes", 0.0)).c_str(), info["files"].size());
  std::printf("  %-40s %12s %8s %8s\n", "file", "bytes", "chunks", "tensors");
  for (const nlohmann::json& f : info["files"])
    std::printf("  %-40s %12lld %8lld %8lld\n", f["name"].get<std::string>().c_str(), (long long)f["bytes"].get<int64_t>(),
                (long long)f["chunks"].get<int64_t>(), (long long)f["tensors"].get<int64_t>());
  if (!a.json.empty()) write_file(a.json, info.dump(2) + "\n");
  return 0;
}

int run_ckpt_consolidate(const CkptConsolidateArgs& a) {
  const std::string stem = stem_of(a.path);
  const std::string out = a.out + "/ckpt";  // a run directory, as dtrain train --out writes
  const double t0 = now_seconds();
  check(dt_checkpoint_consolidate(stem.c_str(), out.c_str()), "consolidating the checkpoint");
  std::printf("wrote %s.index.json: %s as one rank's checkpoint (%.2f s)\n", out.c_str(), stem.c_str(),
              now_seconds() - t0);
  return 0;
}

}  // namespace

void add_checkpoint_command(CLI::App& app) {
  CLI::App* c = app.add_subcommand("checkpoint", "Inspect a checkpoint, or rewrite a sharded one as one rank's");
  c->require_subcommand(1);
  auto i = std::make_shared<CkptInspectArgs>();
  CLI::App* ins = c->add_subcommand("inspect", "The layout that saved a checkpoint, its files, chunks and bytes");
  ins->add_option("path", i->path, "A run directory (dtrain train --out) or a checkpoint's path stem")->required();
  ins->add_option("--json", i->json, "Also write it as JSON to this file");
  ins->footer("Example:\n  dtrain checkpoint inspect run --json ckpt.json");
  ins->callback([i] { throw Exit{run_ckpt_inspect(*i)}; });
  auto k = std::make_shared<CkptConsolidateArgs>();
  CLI::App* con = c->add_subcommand("consolidate", "Rewrite a checkpoint of any layout as one rank's (one file, every tensor whole)");
  con->add_option("path", k->path, "A run directory (dtrain train --out) or a checkpoint's path stem")->required();
  con->add_option("out", k->out, "A directory to write OUT/ckpt into (dtrain generate --checkpoint OUT/ckpt reads it)")->required();
  con->footer("It holds the whole state in memory while it works.\nExample:\n  dtrain checkpoint consolidate run run1");
  con->callback([k] { throw Exit{run_ckpt_consolidate(*k)}; });
}

}  // namespace dtcli
