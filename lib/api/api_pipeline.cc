// dt_pipeline_schedule_json: a pipeline schedule as data and the simulator's run of it
// (parallel/pipeline_schedule.h), for `dtrain plan --pp` without a model and for bindings.
#include <cmath>

#include "core/options.h"
#include "lib/api/firewall.h"
#include "parallel/pipeline_schedule.h"

using dt::api::guard;

extern "C" {

dt_status dt_pipeline_schedule_json(const dt_options* options, char* buf, size_t capacity, size_t* needed) {
  return guard("dt_pipeline_schedule_json", [&] {
    dt::OptionReader r(dt::api::opts_of(options), "dt_pipeline_schedule_json",
                       {"pp", "micro_batches", "pp_schedule", "virtual_stages", "forward_cost", "backward_cost",
                        "timeline_trace"});
    DT_CHECK(r.has("pp"), "option \"pp\" is required: the pipeline's stages, 1 to 1024");
    const int64_t P = r.get_int("pp", 1), M = r.get_int("micro_batches", 1), v = r.get_int("virtual_stages", 1);
    DT_CHECK(P >= 1 && P <= 1024, "option \"pp\" = " + std::to_string(P) + "; accepted: 1 to 1024");
    DT_CHECK(M >= 1 && M <= 65536, "option \"micro_batches\" = " + std::to_string(M) + "; accepted: 1 to 65536");
    DT_CHECK(v >= 1 && v <= 64, "option \"virtual_stages\" = " + std::to_string(v) + "; accepted: 1 to 64");
    // The bound dt_plan_json applies to the same simulation (pp 1024 x 8192 took 45 s and 8.6 GB).
    dt::parallel::check_simulation_size(P, M, v, "option \"pp\"", "option \"micro_batches\"", "option \"virtual_stages\"");
    const std::string name = r.get_string("pp_schedule", "1f1b");
    dt::parallel::PipeCosts costs;
    for (auto [key, field] : {std::pair{"forward_cost", &costs.forward}, std::pair{"backward_cost", &costs.backward}}) {
      const double c = r.get_double(key, *field);
      DT_CHECK(std::isfinite(c) && c > 0, std::string("option \"") + key + "\" = " + std::to_string(c) +
                                              "; accepted: > 0 (time units)");
      *field = c;
    }
    costs.backward_input = costs.backward_weight = costs.backward / 2;
    const dt::parallel::PipeSchedule s =
        dt::parallel::make_pipe_schedule(name, static_cast<int>(P), static_cast<int>(M), static_cast<int>(v));
    const dt::parallel::PipeSimulation sim = dt::parallel::simulate(s, costs);
    nlohmann::json actions = nlohmann::json::array();
    for (const auto& rank : s.actions) {
      nlohmann::json list = nlohmann::json::array();
      for (const dt::parallel::PipeAction& a : rank) list.push_back(a.str());
      actions.push_back(list);
    }
    nlohmann::json j = {{"schedule", name},
                        {"stages", P},
                        {"micro_batches", M},
                        {"virtual_stages", v},
                        {"actions", actions},
                        {"makespan", sim.makespan},
                        {"bubble_fraction", sim.bubble_fraction},
                        {"bubble_formula", dt::parallel::bubble_formula(name, static_cast<int>(P), static_cast<int>(M),
                                                                        static_cast<int>(v))},
                        {"bubble_formula_text",
                         dt::parallel::bubble_formula_text(name, static_cast<int>(P), static_cast<int>(M),
                                                           static_cast<int>(v))},
                        {"utilization", 1.0 - sim.bubble_fraction},
                        {"activation_peak", sim.activation_peak},
                        {"activation_peak_formula",
                         dt::parallel::activation_peak_formula(name, static_cast<int>(P), static_cast<int>(M),
                                                               static_cast<int>(v))},
                        {"timeline", dt::parallel::timeline_ascii(s, sim)}};
    if (r.get_bool("timeline_trace", false)) j["chrome_trace"] = dt::parallel::timeline_chrome_trace(s, sim);
    dt::api::write_text(j.dump(), buf, capacity, needed);
  });
}

}  // extern "C"
