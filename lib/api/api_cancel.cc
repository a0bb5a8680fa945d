// dt_cancel: a flag any thread raises to stop the engine calls that watch it. The handle
// holds a shared_ptr so that an engine it is attached to keeps the flag alive after the
// host releases its own reference.
#include <memory>

#include "core/cancel.h"
#include "lib/api/firewall.h"

using dt::api::guard;
using dt::api::need;

struct dt_cancel {
  std::shared_ptr<dt::CancelFlag> flag = std::make_shared<dt::CancelFlag>();
};

namespace dt::api {
std::shared_ptr<CancelFlag> cancel_flag_of(dt_cancel* c) { return c ? c->flag : nullptr; }
}  // namespace dt::api

extern "C" {

dt_status dt_cancel_create(dt_cancel** out) {
  return guard("dt_cancel_create", [&] {
    need(out, "out");
    *out = new dt_cancel();
  });
}

void dt_cancel_destroy(dt_cancel* cancel) { delete cancel; }

dt_status dt_cancel_request(dt_cancel* cancel) {
  return guard("dt_cancel_request", [&] { need(cancel, "cancel")->flag->request(); });
}

dt_status dt_cancel_reset(dt_cancel* cancel) {
  return guard("dt_cancel_reset", [&] { need(cancel, "cancel")->flag->reset(); });
}

dt_status dt_cancel_is_requested(const dt_cancel* cancel, int32_t* out) {
  return guard("dt_cancel_is_requested", [&] {
    need(out, "out");
    *out = need(cancel, "cancel")->flag->requested() ? 1 : 0;
  });
}

}  // extern "C"
