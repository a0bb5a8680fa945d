// dtrain info: what this machine runs libdtrain's kernels on (the CPU's instruction sets, the
// GEMM path chosen for each dtype and why, the GPUs), from dt_runtime_info_json.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "flags.h"

namespace dtcli {
namespace {

struct InfoArgs {
  std::string json;
};

nlohmann::json runtime_info() {
  size_t needed = 0;
  check(dt_runtime_info_json(nullptr, 0, &needed), "dt_runtime_info_json");
  std::string s(needed, '\0');
  check(dt_runtime_info_json(s.data(), s.size(), &needed), "dt_runtime_info_json");
  s.resize(needed - 1);
  return nlohmann::json::parse(s);
}

int run_info(const InfoArgs& a) {
  const nlohmann::json info = runtime_info();
  const nlohmann::json& cpu = info["cpu"];
  std::string isas;
  for (const auto& [name, on] : cpu["isa"].items())
    if (on.get<bool>()) isas += (isas.empty() ? "" : " ") + name;
  std::printf("libdtrain %s\n", info["version"].get<std::string>().c_str());
  std::printf("cpu           %s\n", cpu["cpu"].get<std::string>().c_str());
  std::printf("isa           %s (%s)%s\n", cpu["isa_level"].get<std::string>().c_str(), isas.c_str(),
              cpu["max_isa_cap"].is_null() ? "" : (", capped by DTRAIN_CPU_MAX_ISA=" + cpu["max_isa_cap"].get<std::string>()).c_str());
  if (cpu.contains("amx_denied")) std::printf("amx           unusable: %s\n", cpu["amx_denied"].get<std::string>().c_str());
  const nlohmann::json& g = cpu["gemm"];
  std::printf("gemm f32      %s\n", g["f32"].get<std::string>().c_str());
  std::printf("gemm bf16     %s: %s\n", g["bf16"].get<std::string>().c_str(), g["bf16_reason"].get<std::string>().c_str());
  std::printf("gemm f16      %s\n", g["f16"].get<std::string>().c_str());
  std::printf("cuda devices  %lld\n", static_cast<long long>(info["cuda_devices"].get<int64_t>()));
  if (!a.json.empty()) write_file(a.json, info.dump(2) + "\n");
  return 0;
}

}  // namespace

void add_info_command(CLI::App& app) {
  auto a = std::make_shared<InfoArgs>();
  CLI::App* c = app.add_subcommand("info", "What libdtrain runs on here: CPU instruction sets, GEMM path per dtype, GPUs");
  c->footer("The GEMM path is chosen at run time; DTRAIN_CPU_BF16_GEMM=0|1 and DTRAIN_CPU_MAX_ISA=avx2|avx512|"
            "avx512_bf16|amx override it.\nExample:\n  DTRAIN_CPU_MAX_ISA=avx512 dtrain info --json info.json");
  c->add_option("--json", a->json, "Also write it as JSON to this file");
  c->callback([a] { throw Exit{run_info(*a)}; });
}

}  // namespace dtcli
